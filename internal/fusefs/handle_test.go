package fusefs

import (
	"context"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// Operations on a handle after its release answer EBADF, as on a closed descriptor, and a
// second release counts the open out only once.
func TestReleasedHandleAnswersEBADF(t *testing.T) {
	ctx := context.Background()
	n := &Node{root: New(Options{Owner: rootOwner{}})}
	e := wire.Entry{Name: "f", Mode: wire.ModeRegular | 0o644, Size: 3, Ino: 5, Nlink: 1, Data: []byte("abc"), HasData: true}
	if errno := n.reserveOpen(); errno != 0 {
		t.Fatal(errno)
	}
	fh, _, errno := n.openHandle(ctx, syscall.O_RDONLY, &e)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*Handle)
	buf := make([]byte, 8)
	if res, errno := h.Read(ctx, buf, 0); errno != 0 {
		t.Fatalf("read while open: %v", errno)
	} else if b, _ := res.Bytes(buf); string(b) != "abc" {
		t.Fatalf("read while open: %q", b)
	}
	if errno := h.Release(ctx); errno != 0 {
		t.Fatalf("release: %v", errno)
	}
	ops := map[string]func() syscall.Errno{
		"read":     func() syscall.Errno { _, errno := h.Read(ctx, buf, 0); return errno },
		"write":    func() syscall.Errno { _, errno := h.Write(ctx, []byte("x"), 0); return errno },
		"flush":    func() syscall.Errno { return h.Flush(ctx) },
		"fsync":    func() syscall.Errno { return h.Fsync(ctx, 0) },
		"allocate": func() syscall.Errno { return h.Allocate(ctx, 0, 10, 0) },
		"release":  func() syscall.Errno { return h.Release(ctx) },
	}
	for name, op := range ops {
		if errno := op(); errno != syscall.EBADF {
			t.Errorf("%s after release: %v, want EBADF", name, errno)
		}
	}
	if n.opens != 0 {
		t.Errorf("opens = %d after one open and its release, want 0", n.opens)
	}
}
