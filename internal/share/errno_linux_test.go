package share

import (
	"os"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// ENODATA exists under that name on Linux only (the BSDs say ENOATTR).
func TestErrnoNoData(t *testing.T) {
	for _, err := range []error{syscall.ENODATA, os.NewSyscallError("fgetxattr", syscall.ENODATA)} {
		if got := Errno(err); got != wire.ENODATA {
			t.Errorf("Errno(%v) = %v, want ENODATA", err, got)
		}
	}
	if Message(fail("getxattr", "a", syscall.ENODATA)) != `getxattr "a": no such attribute` {
		t.Errorf("Message = %q", Message(fail("getxattr", "a", syscall.ENODATA)))
	}
}
