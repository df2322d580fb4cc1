package share

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// Extended attributes: only the "user." namespace is served, on the file itself (a final
// symlink is not followed). The system calls are in syscalls_linux.go; elsewhere every call
// is EOPNOTSUPP.

// xattrPrefix is the one extended attribute namespace a share serves. The others hold the
// owner's security labels, ACLs, capabilities and administrator data (security., system.,
// trusted.), which mean nothing on another device and which no peer may set.
const xattrPrefix = "user."

// checkXattrName refuses a name outside the user namespace with EOPNOTSUPP, which Linux gives
// for a namespace a filesystem does not support, and a name with nothing after the prefix or
// with a NUL byte with EINVAL.
func checkXattrName(op, path, name string) error {
	switch {
	case !strings.HasPrefix(name, xattrPrefix):
		return fail(op, path, errnoErr(fmt.Sprintf("attribute %q: only the %q namespace is shared", name, xattrPrefix), syscall.EOPNOTSUPP))
	case name == xattrPrefix || strings.IndexByte(name, 0) >= 0 || len(name) > wire.MaxXattrName:
		return fail(op, path, errnoErr(fmt.Sprintf("invalid attribute name %q", name), syscall.EINVAL))
	case isReservedXattr(name):
		return fail(op, path, errnoErr(fmt.Sprintf("attribute %q: the %q names are the share's own", name, reservedXattrs), syscall.EPERM))
	}
	return nil
}

// errNoXattrs marks a name whose type carries no user attributes: Linux allows them on regular
// files and directories only, and answers ENODATA to a read and EPERM to a change on anything
// else (a symlink, a FIFO).
var errNoXattrs = errors.New("user attributes exist only on regular files and directories")

// openXattr opens path (valid) to read or change its extended attributes through the returned
// descriptor. The name is looked at with lstat first: a symlink is answered for itself, as
// lgetxattr does, so it is never followed and a special file is never opened; both give
// errNoXattrs. The open itself goes through os.Root with O_NONBLOCK and O_NOCTTY, and what it
// opened is checked again.
func (s *Share) openXattr(op, path string) (*os.File, error) {
	name := rootName(path)
	fi, err := s.root.Lstat(name)
	if err != nil {
		return nil, fail(op, path, err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, errNoXattrs
	}
	f, err := s.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fail(op, path, err)
	}
	if fi, err = f.Stat(); err != nil || (!fi.IsDir() && !fi.Mode().IsRegular()) {
		f.Close()
		if err != nil {
			return nil, fail(op, path, err)
		}
		return nil, errNoXattrs
	}
	if err := s.checkLinks(op, path, f, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// GetXattr returns the value of the extended attribute name ("user." namespace only) of path,
// itself if it is a symlink. A missing attribute is ENODATA.
func (s *Share) GetXattr(path, name string) ([]byte, error) {
	const op = "getxattr"
	if err := check(op, path); err != nil {
		return nil, err
	}
	if isReservedXattr(name) {
		return nil, fail(op, path, errnoErr("no such attribute", wire.ENODATA))
	}
	if err := checkXattrName(op, path, name); err != nil {
		return nil, err
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return nil, fail(op, path, errnoErr(errNoXattrs.Error(), wire.ENODATA))
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := getXattr(f, name)
	if err != nil {
		return nil, fail(op, path, err)
	}
	return v, nil
}

// ListXattr returns the names of path's extended attributes in the "user." namespace, in the
// order the owner's filesystem gives them; a symlink or special file has none.
func (s *Share) ListXattr(path string) ([]string, error) {
	const op = "listxattr"
	if err := check(op, path); err != nil {
		return nil, err
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := listXattr(f)
	if err != nil {
		return nil, fail(op, path, err)
	}
	names := []string{}
	for _, n := range all {
		if strings.HasPrefix(n, xattrPrefix) && !isReservedXattr(n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// SetXattr sets the extended attribute name ("user." namespace only) of path to value. flags
// are wire.XattrCreate (EEXIST if it exists) or wire.XattrReplace (ENODATA if it does not). A
// symlink or special file takes none (EPERM).
func (s *Share) SetXattr(path, name string, value []byte, flags uint32) error {
	const op = "setxattr"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if err := checkXattrName(op, path, name); err != nil {
		return err
	}
	if flags&^(wire.XattrCreate|wire.XattrReplace) != 0 || flags == wire.XattrCreate|wire.XattrReplace {
		return fail(op, path, errnoErr(fmt.Sprintf("invalid setxattr flags %#x", flags), syscall.EINVAL))
	}
	if len(value) > wire.MaxXattrValue {
		return fail(op, path, errnoErr("attribute value too large", syscall.E2BIG))
	}
	return s.changeXattr(op, path, func(f *os.File) error { return setXattr(f, name, value, flags) })
}

// RemoveXattr removes the extended attribute name ("user." namespace only) of path; a missing
// one is ENODATA, and a symlink or special file is EPERM.
func (s *Share) RemoveXattr(path, name string) error {
	const op = "removexattr"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if err := checkXattrName(op, path, name); err != nil {
		return err
	}
	return s.changeXattr(op, path, func(f *os.File) error { return removeXattr(f, name) })
}

// changeXattr opens path (valid, checked writable) for a change of its extended attributes
// and makes it with change. A symlink or special file has none to change: EPERM, as Linux
// answers for a user attribute there.
func (s *Share) changeXattr(op, path string, change func(f *os.File) error) error {
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return fail(op, path, errnoErr(errNoXattrs.Error(), syscall.EPERM))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := change(f); err != nil {
		return fail(op, path, err)
	}
	return nil
}
