package share

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// TestRefuseWindowsName runs the check a Windows owner makes on every new name (names.go),
// here on Linux: device names, final dots and spaces and forbidden characters are EINVAL with
// a message that says what to rename; ordinary names pass; nothing is created either way.
func TestRefuseWindowsName(t *testing.T) {
	fx := newFixture(t, false)
	for _, tc := range []struct {
		path string
		want wire.Errno
		says string
	}{
		{"new.txt", 0, ""},
		{"sub/Readme", 0, ""},
		{"CON", wire.EINVAL, "device name"},
		{"sub/nul.txt", wire.EINVAL, "device name"},
		{"trailing.", wire.EINVAL, "dot or a space"},
		{"sub/a:b", wire.EINVAL, "does not allow"},
		{"a?", wire.EINVAL, "does not allow"},
	} {
		before := snapshot(t, fx.shareDir)
		err := fx.s.refuseWindowsName("create", tc.path, "")
		wantCode(t, tc.path, err, tc.want)
		if msg := Message(err); tc.want != 0 && (!strings.Contains(msg, tc.says) || !strings.Contains(msg, "rename")) {
			t.Errorf("%s: message %q does not say %q and what to rename", tc.path, msg, tc.says)
		}
		sameSnapshot(t, tc.path, before, snapshot(t, fx.shareDir))
	}
	// A folder that tells case apart (Linux's) holds "A.TXT" beside "a.txt"; one that does not
	// (NTFS's, Wine's) would merge them.
	want := wire.Errno(0)
	if _, err := os.Lstat(filepath.Join(fx.shareDir, "A.TXT")); err == nil {
		want = wire.EEXIST
	}
	wantCode(t, "A.TXT", fx.s.refuseWindowsName("create", "A.TXT", ""), want)
}

// TestFoldTwin: the entry a name would reach under another spelling on a folder that does not
// tell case apart.
func TestFoldTwin(t *testing.T) {
	for _, tc := range []struct {
		names []string
		name  string
		want  string
	}{
		{[]string{"README", "b"}, "Readme", "README"},
		{[]string{"README", "Readme"}, "Readme", ""}, // listed as spelt: the name itself
		{[]string{"a", "b"}, "c", ""},
		{[]string{"Straße"}, "STRASSE", ""}, // no simple fold: NTFS keeps them apart too
		{[]string{"ÉTÉ"}, "été", "ÉTÉ"},
		{nil, "x", ""},
	} {
		if got := foldTwin(tc.names, tc.name); got != tc.want {
			t.Errorf("foldTwin(%q, %q) = %q, want %q", tc.names, tc.name, got, tc.want)
		}
	}
}

// TestCaseTwinNeedsTheFolderToFold: caseTwin asks the folder, not the platform. Here the
// folder tells case apart, so a name differing only in case is a new file.
func TestCaseTwinNeedsTheFolderToFold(t *testing.T) {
	fx := newFixture(t, false)
	if err := os.WriteFile(filepath.Join(fx.shareDir, "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if twin := fx.s.caseTwin("Readme", ""); twin != "" {
		t.Fatalf("caseTwin on a case-sensitive folder = %q, want none", twin)
	}
	if twin := fx.s.caseTwin("README", ""); twin != "" {
		t.Fatalf("caseTwin of an existing name as spelt = %q, want none", twin)
	}
}
