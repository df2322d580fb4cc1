// Package share is the owner's file system for one exported folder: stat, listings, reads,
// uploads and in-place changes on share-relative paths, resolved through an os.Root.
//
// Every path is validated with wire.CheckPath and then resolved through an os.Root opened on the
// folder, so a peer can never read, write or stat anything outside it: not with "..", absolute
// paths, NUL bytes or over-long names, and not through symlinks that lead outside. The package
// must not resolve a peer-supplied path any other way (no os.Open, os.Stat, filepath.Join on
// Dir()), must not touch disk for a write on a read-only share, and must never put the owner's
// absolute paths into text meant for a peer (see Message).
//
// It knows nothing of sessions, peers or frames: internal/serve answers a peer's requests and
// calls it. It speaks the wire's vocabulary for files only (wire.Entry, wire.Errno and the
// request bodies that describe a change).
//
// Files: share.go opens a share and builds its errors; read.go stats, lists and opens for
// reading; write.go uploads (part files), directories, symlinks and attributes; edit.go files
// changed in place; namespace.go names removed, renamed and linked; xattr.go extended
// attributes; watch.go the change feed; errno.go errors to wire codes and peer-facing texts.
package share

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// Share is one exported folder. It is safe for concurrent use: its fields never change after
// Open and os.Root serialises nothing but its own reference count; w guards its own state.
type Share struct {
	name     string
	dir      string
	readOnly bool
	// privileged lets peers do what needs more trust than writing files: change owners and
	// groups, keep set-user-ID and set-group-ID bits on files, and make device nodes, as far
	// as the owner's account may (SetPrivileged).
	privileged bool
	root       *os.Root
	w          watchState // the peers' change subscriptions (watch.go)
	// writeLocks serialise WRITEs and SETATTRs of one file, striped by inode number (files
	// that share a stripe wait for each other too, which costs little): see lockedWrite.
	writeLocks [256]sync.Mutex
	parts      partSweeper // abandoned uploads' part files (parts.go)
	dirSyncs   dirSyncs    // directory syncs after commits (dirsync.go)
	links      linkState   // hard links allowed and made here (hardlink.go)
}

// Options are a share's settings besides its name and folder.
type Options struct {
	ReadOnly bool // peers may only read
	// AllowHardlinks serves regular files with several hard links whatever made them; without
	// it only those linked through the share are served (hardlink.go).
	AllowHardlinks bool
}

// Open opens the folder dir for serving as the share name, with default options but for
// readOnly. dir must exist and be a directory.
func Open(name, dir string, readOnly bool) (*Share, error) {
	return OpenWith(name, dir, Options{ReadOnly: readOnly})
}

// OpenWith opens the folder dir for serving as the share name with the options o.
func OpenWith(name, dir string, o Options) (*Share, error) {
	readOnly := o.ReadOnly
	if err := wire.CheckShareName(name); err != nil {
		return nil, fmt.Errorf("share name %q cannot be used, rename the share: %w", name, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("share %s: folder %s: %w", name, dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("share %s: folder %s does not exist: create it or correct the share's path: %w", name, abs, err)
	case err != nil:
		return nil, fmt.Errorf("share %s: cannot reach folder %s: check its permissions: %w", name, abs, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("share %s: %s is not a folder: share the folder that holds it instead", name, abs)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("share %s: cannot open folder %s: check its permissions: %w", name, abs, err)
	}
	s := &Share{name: name, dir: abs, readOnly: readOnly, root: root}
	s.links.allow = o.AllowHardlinks
	s.startPartSweeper()
	return s, nil
}

// Name returns the share's name as peers see it.
func (s *Share) Name() string { return s.name }

// Dir returns the absolute path of the shared folder. It is for the owner's own display and
// logs only: it must never be sent to a peer.
func (s *Share) Dir() string { return s.dir }

// SetPrivileged lets peers change owners and groups, set set-user-ID and set-group-ID bits on
// files and make device nodes in the share, as far as the owner's account may; without it such
// requests are refused with EPERM, which is what a local file system answers a user without
// those rights. Call it before the share is served.
func (s *Share) SetPrivileged(on bool) { s.privileged = on }

// ReadOnly reports whether peers may only read the share.
func (s *Share) ReadOnly() bool { return s.readOnly }

// Close releases the folder. Calls made after Close fail; files already handed out stay open.
func (s *Share) Close() error {
	s.w.close()
	s.closeParts()
	if err := s.root.Close(); err != nil {
		return fmt.Errorf("share %s: close: %w", s.name, err)
	}
	return nil
}

// ErrPathRefused is wire.ErrPathRefused itself, so errors.Is matches either name. Every refusal
// of a path, whether by validation or because it leads outside the share, wraps it.
var ErrPathRefused = wire.ErrPathRefused

// ErrReadOnly is matched (errors.Is) by the error every write method returns on a read-only share.
var ErrReadOnly = errors.New("share is read-only: ask its owner to share it writable with you")

// readOnlyError names the share in the refusal.
type readOnlyError struct{ share string }

func (e *readOnlyError) Error() string {
	return "share " + e.share + " is read-only: ask its owner to share it writable with you"
}

func (e *readOnlyError) Is(target error) bool { return target == ErrReadOnly }

// refusal is a refused path. why is text fit for a peer: it holds only the share-relative path.
type refusal struct {
	why string
	err error // the validation or os.Root error behind it
}

func (e *refusal) Error() string   { return e.why }
func (e *refusal) Unwrap() []error { return []error{ErrPathRefused, e.err} }

// opError records the operation and share-relative path of a failure, which is all Message
// reveals besides the error code.
type opError struct {
	op   string
	path string // share-relative
	err  error
}

func (e *opError) Error() string { return e.op + " " + displayPath(e.path) + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func displayPath(p string) string {
	if p == "" {
		return "(share root)"
	}
	return fmt.Sprintf("%q", p)
}

// fail wraps err with the operation and path, turning an os.Root escape into a refusal so that
// callers and Errno see ErrPathRefused.
func fail(op, path string, err error) error {
	if rootfs.IsEscape(err) {
		err = &refusal{why: "path refused: it leads outside the share", err: err}
	}
	return &opError{op: op, path: path, err: err}
}

// check validates a peer-supplied path before any use. The wire decoder validates too; this is
// defence in depth for callers that build paths themselves.
func check(op, path string) error {
	if err := wire.CheckPath(path); err != nil {
		return &opError{op: op, path: path, err: &refusal{why: err.Error(), err: err}}
	}
	return nil
}

// checkWrite validates path and refuses any write on a read-only share before disk is touched.
func (s *Share) checkWrite(op, path string) error {
	if err := check(op, path); err != nil {
		return err
	}
	if s.readOnly {
		return &opError{op: op, path: path, err: &readOnlyError{share: s.name}}
	}
	return nil
}

// checkWriteName is checkWrite for a change of the name path, which the share root cannot
// take: there it fails with errno, as a local file system answers, and why.
func (s *Share) checkWriteName(op, path, why string, errno syscall.Errno) error {
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if path == "" {
		return fail(op, path, errnoErr(why, errno))
	}
	return nil
}

// rootName turns a share-relative path into an os.Root name: "" (the share root) becomes ".".
func rootName(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// join appends a directory entry's name to a share-relative directory path.
func join(dir, name string) string { return wire.Join(dir, name) }

// partName returns the temporary upload name for path: ".<base>.peerfs-part" in the same
// directory. path must be valid and not the root.
func partName(path string) string {
	return rootfs.PartName(parentDir(path), baseName(path))
}

// errnoErr wraps a bare errno so it reads as a system error and maps through Errno.
func errnoErr(what string, errno error) error { return fmt.Errorf("%s: %w", what, errno) }
