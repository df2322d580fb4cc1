package fusefs

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

func TestKilledMode(t *testing.T) {
	for _, c := range []struct {
		mode, want uint32
		kill       bool
	}{
		{0o755, 0o755, false},
		{0o4755, 0o755, true},
		{0o2755, 0o755, true},   // setgid with group execute
		{0o2745, 0o2745, false}, // setgid without it marks mandatory locking, kept
		{0o6711, 0o711, true},
		{0o1777, 0o1777, false},                 // sticky stays
		{syscall.S_IFREG | 0o4755, 0o755, true}, // a wire.Entry's mode: type bits go
	} {
		got, kill := killedMode(c.mode)
		if got != c.want || kill != c.kill {
			t.Errorf("killedMode(%#o) = %#o, %v; want %#o, %v", c.mode, got, kill, c.want, c.kill)
		}
	}
}

func TestMayKeepPrivs(t *testing.T) {
	if mayKeepPrivs(context.Background()) {
		t.Error("a context without a caller keeps setuid bits")
	}
	self := uint32(os.Getpid())
	caps, ok := effectiveCaps(self)
	if !ok {
		t.Skip("no /proc/self/status to read capabilities from")
	}
	ctx := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: 12345}, Pid: self})
	if got, want := mayKeepPrivs(ctx), caps&(1<<capFsetid) != 0; got != want {
		t.Errorf("mayKeepPrivs for this process = %v, its CapEff %#x says %v", got, caps, want)
	}
	gone := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: 0}, Pid: 1 << 30})
	if !mayKeepPrivs(gone) {
		t.Error("a caller whose /proc entry is gone keeps no privilege even with uid 0")
	}
}
