package share

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

func TestErrno(t *testing.T) {
	fx := newFixture(t, false) // also makes sure the escape error has been learned
	r, err := os.OpenRoot(fx.shareDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, rootEscape := r.Stat("out/canary")
	_, rootMissing := r.Stat("missing")
	renameEscape := r.Rename("a.txt", "../x")

	tests := []struct {
		name string
		err  error
		want wire.Errno
	}{
		{"nil", nil, 0},
		{"ENOENT", syscall.ENOENT, wire.ENOENT},
		{"fs.ErrNotExist", fs.ErrNotExist, wire.ENOENT},
		{"PathError ENOENT", &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, wire.ENOENT},
		{"os.Root missing", rootMissing, wire.ENOENT},
		{"EACCES", syscall.EACCES, wire.EACCES},
		{"EPERM is not EACCES", syscall.EPERM, wire.EPERM},
		{"EBUSY", syscall.EBUSY, wire.EBUSY},
		{"EAGAIN", &os.PathError{Op: "open", Path: "x", Err: syscall.EAGAIN}, wire.EAGAIN},
		{"EMLINK", syscall.EMLINK, wire.EMLINK},
		{"ENOSYS", syscall.ENOSYS, wire.ENOSYS},
		{"EOPNOTSUPP", os.NewSyscallError("fsetxattr", syscall.EOPNOTSUPP), wire.EOPNOTSUPP},
		{"ENOTSUP", syscall.ENOTSUP, wire.EOPNOTSUPP},
		{"fs.ErrPermission", fs.ErrPermission, wire.EACCES},
		{"ENOSPC", &os.SyscallError{Syscall: "write", Err: syscall.ENOSPC}, wire.ENOSPC},
		{"EDQUOT", syscall.EDQUOT, wire.EDQUOT},
		{"EROFS", syscall.EROFS, wire.EROFS},
		{"ErrReadOnly", ErrReadOnly, wire.EROFS},
		{"read-only share", fmt.Errorf("x: %w", &readOnlyError{share: "s"}), wire.EROFS},
		{"EEXIST", syscall.EEXIST, wire.EEXIST},
		{"fs.ErrExist", fs.ErrExist, wire.EEXIST},
		{"ENOTDIR", syscall.ENOTDIR, wire.ENOTDIR},
		{"EISDIR", syscall.EISDIR, wire.EISDIR},
		{"ENOTEMPTY is not EEXIST", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.ENOTEMPTY}, wire.ENOTEMPTY},
		{"ENAMETOOLONG", syscall.ENAMETOOLONG, wire.ENAMETOOLONG},
		{"ELOOP", syscall.ELOOP, wire.ELOOP},
		{"EXDEV", syscall.EXDEV, wire.EXDEV},
		{"EINVAL", syscall.EINVAL, wire.EINVAL},
		{"fs.ErrInvalid", fs.ErrInvalid, wire.EINVAL},
		{"EFBIG", syscall.EFBIG, wire.EFBIG},
		{"CheckPath", wire.CheckPath("../x"), wire.ErrnoPathRefused},
		{"wire.ErrPathRefused", wire.ErrPathRefused, wire.ErrnoPathRefused},
		{"ErrPathRefused", fmt.Errorf("wrapped: %w", ErrPathRefused), wire.ErrnoPathRefused},
		{"os.Root escape", rootEscape, wire.ErrnoPathRefused},
		{"os.Root rename escape", renameEscape, wire.ErrnoPathRefused},
		{"refusal wrapping an errno", &refusal{why: "x", err: syscall.ENOENT}, wire.ErrnoPathRefused},
		{"wire code passes through", fmt.Errorf("x: %w", wire.ECANCELED), wire.ECANCELED},
		{"remote error passes through", &wire.RemoteError{Code: wire.ENOSPC}, wire.ENOSPC},
		{"unlisted errno", syscall.EBADF, wire.EIO},
		{"EIO", syscall.EIO, wire.EIO},
		{"io.EOF", io.EOF, wire.EIO},
		{"closed", os.ErrClosed, wire.EIO},
		{"plain", errors.New("boom"), wire.EIO},
		{"escape text elsewhere", errors.New("the path escapes from parent dir"), wire.EIO},
	}
	for _, tt := range tests {
		if got := Errno(tt.err); got != tt.want {
			t.Errorf("%s: Errno(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	_, escErr := s.Stat("out/canary")
	_, missErr := s.Stat("sub/missing")
	_, longErr := s.Stat(strings.Repeat("d/", wire.MaxPathLen/2) + "x")
	_, nulErr := s.Stat("a\x00\nb")
	rootErr := s.Mkdir("a.txt", 0o755, 0)
	// An error from an *os.File a Share handed out names the file by its absolute path.
	f, _, err := s.OpenRead("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, readErr := f.Read(make([]byte, 1))
	wrappedRead := fail("read", "a.txt", readErr)

	tests := []struct {
		name string
		err  error
		want string // exact, or a prefix when it ends in "*"
	}{
		{"nil", nil, ""},
		{"escape", escErr, `stat "out/canary": path refused: it leads outside the share`},
		{"missing", missErr, `stat "sub/missing": no such file or directory`},
		{"exists", rootErr, `mkdir "a.txt": file exists`},
		{"invalid path", nulErr, `stat "a\x00\nb": path refused: contains a NUL byte`},
		{"too long", longErr, `stat "d/d/d/*`},
		{"file error", wrappedRead, `read "a.txt": input/output error`},
		{"raw OS error", &fs.PathError{Op: "open", Path: fx.shareDir + "/x", Err: syscall.ENOENT}, "no such file or directory"},
		{"read-only", &opError{op: "mkdir", path: "", err: &readOnlyError{share: "docs"}},
			"mkdir (share root): share docs is read-only: ask its owner to share it writable with you"},
	}
	for _, tt := range tests {
		got := Message(tt.err)
		if prefix, ok := strings.CutSuffix(tt.want, "*"); ok {
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("%s: Message = %.80q..., want prefix %q", tt.name, got, prefix)
			}
		} else if got != tt.want {
			t.Errorf("%s: Message = %q, want %q", tt.name, got, tt.want)
		}
		if tt.err != nil {
			checkMessage(t, tt.name, tt.err)
			if strings.Contains(got, fx.base) {
				t.Errorf("%s: Message reveals the owner's path: %q", tt.name, got)
			}
		}
	}
	// The owner's own log text keeps the full detail; only Message is scrubbed.
	if !strings.Contains(wrappedRead.Error(), fx.shareDir) {
		t.Errorf("local error text lost the file's path: %v", wrappedRead)
	}
}
