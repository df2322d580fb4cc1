package wire

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// errnoTable is the code table of docs/PROTOCOL.md: every code, its number and its name.
var errnoTable = []struct {
	code Errno
	num  uint32
	name string
}{
	{EPERM, 1, "EPERM"}, {ENOENT, 2, "ENOENT"}, {EIO, 5, "EIO"}, {EBADF, 9, "EBADF"},
	{EAGAIN, 11, "EAGAIN"}, {ENOMEM, 12, "ENOMEM"}, {EACCES, 13, "EACCES"}, {EBUSY, 16, "EBUSY"},
	{EEXIST, 17, "EEXIST"}, {EXDEV, 18, "EXDEV"}, {ENOTDIR, 20, "ENOTDIR"}, {EISDIR, 21, "EISDIR"},
	{EINVAL, 22, "EINVAL"}, {EFBIG, 27, "EFBIG"}, {ENOSPC, 28, "ENOSPC"}, {EROFS, 30, "EROFS"},
	{EMLINK, 31, "EMLINK"}, {ENAMETOOLONG, 36, "ENAMETOOLONG"}, {ENOSYS, 38, "ENOSYS"},
	{ENOTEMPTY, 39, "ENOTEMPTY"}, {ELOOP, 40, "ELOOP"}, {ENODATA, 61, "ENODATA"},
	{EOPNOTSUPP, 95, "EOPNOTSUPP"}, {EDQUOT, 122, "EDQUOT"},
	{ECANCELED, 125, "ECANCELED"},
	{ErrnoPathRefused, 1000, "PATH_REFUSED"}, {ErrnoNoShare, 1001, "NO_SHARE"},
	{ErrnoHashMismatch, 1002, "HASH_MISMATCH"}, {ErrnoChanged, 1003, "CHANGED"},
	{ErrnoProtocol, 1004, "PROTOCOL"}, {ErrnoUnsupported, 1005, "UNSUPPORTED"},
	{ErrnoConflict, 1006, "CONFLICT"},
}

func TestErrnoValuesAndNames(t *testing.T) {
	if len(errnoTable) != len(errnoNames) {
		t.Errorf("the test table has %d codes, errnoNames %d: update both and docs/PROTOCOL.md", len(errnoTable), len(errnoNames))
	}
	for _, e := range errnoTable {
		if uint32(e.code) != e.num {
			t.Errorf("%s = %d, want %d: wire codes never change", e.name, uint32(e.code), e.num)
		}
		if got := e.code.String(); got != e.name {
			t.Errorf("Errno(%d).String() = %q, want %q", e.num, got, e.name)
		}
		if got := e.code.Error(); got != e.name {
			t.Errorf("Errno(%d).Error() = %q, want %q", e.num, got, e.name)
		}
	}
	for _, unknown := range []Errno{0, 3, 999, 1007, 0xFFFFFFFF} {
		if got, want := unknown.String(), fmt.Sprintf("ERRNO_%d", uint32(unknown)); got != want {
			t.Errorf("Errno(%d).String() = %q, want %q", uint32(unknown), got, want)
		}
	}
}

func TestRemoteError(t *testing.T) {
	var err error = &RemoteError{Code: ENOENT, Message: `stat "a": no such file or directory`}
	if !errors.Is(err, ENOENT) {
		t.Error("errors.Is(RemoteError{ENOENT}, ENOENT) = false")
	}
	if errors.Is(err, EIO) || errors.Is(err, ErrnoNoShare) {
		t.Error("RemoteError{ENOENT} matches another code")
	}
	if errors.Is(err, ErrMalformed) {
		t.Error("RemoteError matches a non-Errno target")
	}
	wrapped := fmt.Errorf("reading a/b: %w", err)
	if !errors.Is(wrapped, ENOENT) {
		t.Error("a wrapped RemoteError does not match its code")
	}
	var re *RemoteError
	if !errors.As(wrapped, &re) || re.Code != ENOENT {
		t.Errorf("errors.As: %v", re)
	}
	if got, want := err.Error(), `peer: stat "a": no such file or directory`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&RemoteError{Code: ErrnoHashMismatch}).Error(), "peer: HASH_MISMATCH"; got != want {
		t.Errorf("Error() without a message = %q, want %q", got, want)
	}
	if got, want := (&RemoteError{Code: 4242}).Error(), "peer: ERRNO_4242"; got != want {
		t.Errorf("Error() of an unknown code = %q, want %q", got, want)
	}
}

// TestFromHost: every POSIX code has this system's errno of the same name, and it maps back;
// peerfs's own codes have none, and an errno the wire has no code for is not invented one.
func TestFromHost(t *testing.T) {
	for _, c := range codes {
		posix := c.code < 1000
		if posix != (c.host != 0) {
			t.Errorf("%v: host errno %d", c.code, c.host)
			continue
		}
		if !posix {
			continue
		}
		if got, ok := FromHost(c.host); !ok || got != c.code {
			t.Errorf("FromHost(%v) = %v, %v, want %v", c.host, got, ok, c.code)
		}
	}
	if got, ok := FromHost(syscall.EOPNOTSUPP); !ok || got != EOPNOTSUPP {
		t.Errorf("FromHost(EOPNOTSUPP) = %v, %v", got, ok)
	}
	if got, ok := FromHost(syscall.ENOTSUP); !ok || got != EOPNOTSUPP {
		t.Errorf("FromHost(ENOTSUP) = %v, %v", got, ok)
	}
	if got, ok := FromHost(syscall.E2BIG); ok {
		t.Errorf("FromHost(E2BIG) = %v, want no code", got)
	}
	if got := ENOSPC.Text(); got != "no space left on the owner's device" {
		t.Errorf("ENOSPC.Text() = %q", got)
	}
	if got := ErrnoNoShare.Text(); got != "NO_SHARE" {
		t.Errorf("ErrnoNoShare.Text() = %q, want its name", got)
	}
}
