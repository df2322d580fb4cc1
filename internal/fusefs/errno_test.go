package fusefs

import (
	"context"
	"errors"
	"fmt"
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
		{remote(wire.ENODATA), syscall.ENODATA},
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
