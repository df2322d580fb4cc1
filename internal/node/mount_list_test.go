//go:build linux

package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMountListsFolderLargerThanReplyBudget: a folder whose listing is several times what
// the link lets one exchange queue unread (rpc.MaxQueuedBytes, 32 MiB of frame buffers) lists
// in full through the mount. The owner sends the listing faster than the mount decodes it;
// without credit on the reply frames the mount's link closed as a protocol violation and ls
// failed with EIO.
func TestMountListsFolderLargerThanReplyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 300,000 files: not in -short")
	}
	m := mountShare(t)
	const n = 300_000
	dir := filepath.Join(m.share, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Names of 60 bytes: about 130 bytes an entry on the wire, 40 MB for the listing.
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("entry-%054d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	f, err := os.Open(filepath.Join(m.mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatalf("listing %d files through the mount: %v after %d names", n, err, len(names))
	}
	if len(names) != n {
		t.Fatalf("the mount lists %d names, want %d", len(names), n)
	}
}
