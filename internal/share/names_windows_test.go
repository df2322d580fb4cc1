package share

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// TestCaseCollision: on a Windows owner whose folder does not tell case apart, a new name that
// is another spelling of an existing one is refused with EEXIST and a message naming it, for
// every operation that makes a name; renaming a name to another spelling of itself is allowed.
// It runs where Windows does, and under Wine in scripts/wine-test.sh.
func TestCaseCollision(t *testing.T) {
	dir := tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "readme")); err != nil {
		t.Skip("this folder tells case apart:", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open("t", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Create("Readme", 0o644, 0)
	wantCode(t, "create", err, wire.EEXIST)
	if msg := Message(err); !strings.Contains(msg, `"README"`) || !strings.Contains(msg, "rename") {
		t.Errorf("create: message %q does not name README and say what to do", msg)
	}
	wantCode(t, "mkdir", s.Mkdir("readme", 0o755, 0), wire.EEXIST)
	wantCode(t, "symlink", s.Symlink("ReadMe", "other", 0), wire.EEXIST)
	wantCode(t, "rename over", s.Rename("other", "readme", 0), wire.EEXIST)
	_, err = s.Link("other", "README.")
	wantCode(t, "link to a name ending in a dot", err, wire.EINVAL)
	_, _, err = s.CreatePart("rEADME", false)
	wantCode(t, "upload", err, wire.EEXIST)
	if got, _ := os.ReadFile(filepath.Join(dir, "README")); string(got) != "mine" {
		t.Fatalf("README now holds %q", got)
	}

	wantCode(t, "rename to another spelling of itself", s.Rename("README", "Readme", 0), 0)
	list, err := s.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	// NTFS now spells it Readme; Wine (8.0) keeps README, its file names being Linux's.
	if len(list) != 2 || !strings.EqualFold(list[0].Name, "readme") {
		t.Fatalf("after the case rename the folder lists %+v", list)
	}
}
