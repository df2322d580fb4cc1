package share

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// Every method that makes a name (create, mkdir, symlink, link, the target of a rename, the
// upload of a send) checks it with checkCreate or checkRenameTarget: checkWrite, then, on a
// Windows owner, whether Windows can hold the name as asked (names_windows.go). Elsewhere the
// second check does nothing (names_other.go).

// checkCreate is checkWrite for a path that will name a new entry.
func (s *Share) checkCreate(op, path string) error {
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	return s.checkNewName(op, path, "")
}

// checkRenameTarget is checkCreate for the target of a rename of from: renaming a name to
// another spelling of itself ("readme" to "README") is no collision.
func (s *Share) checkRenameTarget(op, from, to string) error {
	if err := s.checkWrite(op, to); err != nil {
		return err
	}
	return s.checkNewName(op, to, from)
}

// refuseWindowsName refuses a name Windows would refuse or change (wire.WindowsNameError: device
// names, a final dot or space, < > : " | ? * \ and control characters) with EINVAL, and a name
// the folder would merge with an existing one spelt in another case (caseTwin) with EEXIST,
// each with a message saying what to rename. renamedFrom is a rename's source, else "".
func (s *Share) refuseWindowsName(op, path, renamedFrom string) error {
	if path == "" {
		return nil
	}
	if err := wire.WindowsNameError(baseName(path)); err != nil {
		return fail(op, path, &nameError{why: "the owner runs Windows: " + err.Error(), errno: syscall.EINVAL})
	}
	if twin := s.caseTwin(path, renamedFrom); twin != "" {
		return fail(op, path, &nameError{why: fmt.Sprintf("%q already exists in this folder of the owner, which does not tell names differing only in case apart: rename one of them", twin), errno: syscall.EEXIST})
	}
	return nil
}

// nameError refuses a name the owner's system cannot hold as asked. why is text fit for a peer
// (Message sends it): it names only the share-relative name.
type nameError struct {
	why   string
	errno syscall.Errno
}

func (e *nameError) Error() string { return e.why }
func (e *nameError) Unwrap() error { return e.errno }

// caseTwin returns the name of the entry that path (valid, not the root) would reach under
// another spelling, or "": on a folder that does not tell case apart (NTFS, APFS by default),
// creating "Readme" where "README" exists would open or replace README, merging two peers'
// files. The folder's own answer decides, not the platform: path reaches the twin only if
// Lstat of path as spelt finds the very file listed under the other spelling. Costs one Lstat
// when path does not resolve, which is the usual case for a new name; a listing otherwise.
// The entry at except (a rename's source) is no twin.
func (s *Share) caseTwin(path, except string) string {
	fi, err := s.root.Lstat(path)
	if err != nil {
		return ""
	}
	dir := parentDir(path)
	f, err := s.root.Open(rootName(dir))
	if err != nil {
		return ""
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	twin := foldTwin(names, baseName(path))
	if twin == "" || except == join(dir, twin) {
		return ""
	}
	if tfi, err := s.root.Lstat(join(dir, twin)); err != nil || !os.SameFile(fi, tfi) {
		return ""
	}
	return twin
}

// foldTwin returns the entry of names equal to name under case folding but spelt otherwise,
// or "" if name itself is listed or nothing matches.
func foldTwin(names []string, name string) string {
	twin := ""
	for _, n := range names {
		if n == name {
			return ""
		}
		if twin == "" && strings.EqualFold(n, name) {
			twin = n
		}
	}
	return twin
}
