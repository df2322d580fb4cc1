package fusefs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

func TestToErrno(t *testing.T) {
	remote := func(c wire.Errno) error { return fmt.Errorf("op: %w", &wire.RemoteError{Code: c}) }
	cases := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{remote(wire.ENOENT), syscall.ENOENT},
		{remote(wire.EACCES), syscall.EACCES},
		{remote(wire.ENOSPC), syscall.ENOSPC},
		{remote(wire.EDQUOT), syscall.EDQUOT},
		{remote(wire.EXDEV), syscall.EXDEV},
		{remote(wire.ENOTEMPTY), syscall.ENOTEMPTY},
		{remote(wire.EROFS), syscall.EROFS},
		{remote(wire.ENODATA), errNoAttr},
		{remote(wire.EOPNOTSUPP), syscall.EOPNOTSUPP},
		{remote(wire.ErrnoPathRefused), syscall.EACCES},
		{remote(wire.ErrnoNoShare), syscall.ENOENT},
		{remote(wire.ErrnoHashMismatch), syscall.EIO},
		{remote(wire.ErrnoProtocol), syscall.EIO},
		{remote(wire.ErrnoUnsupported), syscall.ENOSYS},
		{remote(wire.Errno(5000)), syscall.EIO},
		{syscall.ENOSPC, syscall.ENOSPC},
		{context.Canceled, syscall.EINTR},
		{errors.New("link down"), syscall.EIO},
	}
	for _, c := range cases {
		if got := toErrno(c.err); got != c.want {
			t.Errorf("toErrno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestWireErrnoComplete checks that every code wire names has a local errno, so a code added
// to wire is not answered as EIO by mistake.
func TestWireErrnoComplete(t *testing.T) {
	for c := wire.Errno(1); c < 2000; c++ {
		if strings.HasPrefix(c.String(), "ERRNO_") {
			continue
		}
		if _, ok := localErrno[c]; !ok {
			t.Errorf("wire code %v (%d) has no local errno in localErrno", c, uint32(c))
		}
	}
}
