package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenMan(t *testing.T) {
	setLinked(t, "v1.2.3", "", "")
	t.Setenv("SOURCE_DATE_EPOCH", "1767366245") // 2026-01-02
	dir := filepath.Join(t.TempDir(), "man1")
	mustRun(t, t.TempDir(), "gen-man", dir)
	for _, page := range []string{"peerfs.1", "peerfs-version.1", "peerfs-share-add.1", "peerfs-completion-bash.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), ".nh\n.TH ") || !strings.Contains(string(b), `"Jan 2026" "peerfs v1.2.3" "peerfs manual"`) {
			t.Errorf("%s has no man header dated by SOURCE_DATE_EPOCH:\n%.300s", page, b)
		}
		if strings.Contains(string(b), "spf13/cobra") {
			t.Errorf("%s names the generator", page)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "peerfs-gen-man.1")); err == nil {
		t.Error("the hidden gen-man command got a man page")
	}
	if help := mustRun(t, t.TempDir(), "--help"); strings.Contains(help, "gen-man") || !strings.Contains(help, "completion") {
		t.Errorf("--help should list completion and not gen-man:\n%s", help)
	}
}
