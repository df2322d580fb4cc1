package share

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/wire"
)

// TestChownAndMknod: chown to the current IDs succeeds anywhere; other IDs and device nodes
// need a privileged share; FIFOs and sockets do not.
func TestChownAndMknod(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	if err := os.WriteFile(filepath.Join(fx.shareDir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := s.Stat("f")
	if err != nil {
		t.Fatal(err)
	}
	same := wire.SetAttrReq{Path: "f", Valid: wire.SetUID | wire.SetGID, UID: e.UID, GID: e.GID}
	if _, err := s.SetAttr(same); err != nil {
		t.Fatalf("chown to the current IDs: %v", err)
	}
	other := wire.SetAttrReq{Path: "f", Valid: wire.SetUID | wire.SetGID, UID: e.UID + 1, GID: e.GID + 1}
	_, err = s.SetAttr(other)
	wantCode(t, "chown in a share that is not privileged", err, wire.EPERM)
	for _, mode := range []uint32{wire.ModeFIFO | 0o600, wire.ModeSocket | 0o600} {
		name := fmt.Sprintf("special-%o", mode)
		got, err := s.Mknod(name, mode, 0)
		if err != nil || got.Mode&wire.ModeTypeMask != mode&wire.ModeTypeMask {
			t.Fatalf("mknod %o: %+v, %v", mode, got, err)
		}
	}
	_, err = s.Mknod("special-fifo-0", wire.ModeFIFO|0o600, 0)
	wantCode(t, "mknod of a free name", err, 0)
	_, err = s.Mknod("special-fifo-0", wire.ModeFIFO|0o600, 0)
	wantCode(t, "mknod over an existing name", err, wire.EEXIST)
	_, err = s.Mknod("null", wire.ModeChar|0o666, unix.Mkdev(1, 3))
	wantCode(t, "mknod of a device in a share that is not privileged", err, wire.EPERM)
	if os.Geteuid() != 0 {
		return
	}
	s.SetPrivileged(true)
	if _, err := s.SetAttr(other); err != nil {
		t.Fatalf("chown in a privileged share: %v", err)
	}
	if _, err := s.Mknod("null", wire.ModeChar|0o666, unix.Mkdev(1, 3)); err != nil {
		t.Fatalf("mknod of a device in a privileged share: %v", err)
	}
}
