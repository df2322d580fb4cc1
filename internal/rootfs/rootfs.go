// Package rootfs holds what the two writers into a local folder through an os.Root would
// otherwise each spell: share (the owner's uploads and in-place changes) and transfer (a
// pull's destination). That is the open flags that keep an open to what was meant, the
// directory sync that makes a rename durable, the name a file is received under until its
// hash verifies, and the recognition of os.Root's refusal of a name that leads outside. And
// the replacement of a small state file that survives a crash (WriteFileAtomic: a device's
// identity, a journal's ID).
//
// It imports nothing of peerfs. It resolves no name inside a folder itself: every such name
// goes through the os.Root its caller passes (WriteFileAtomic writes a state file of the
// device's own, by path).
package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// PartSuffix ends the name of a file still being received: ".<base>.peerfs-part", hidden and
// beside the final name so that the commit is a rename within one directory.
const PartSuffix = ".peerfs-part"

// PartName returns the part-file name of the file base in the directory dir (slash-separated,
// relative to a root; "" or "." for the root itself).
func PartName(dir, base string) string {
	if dir == "" || dir == "." {
		return "." + base + PartSuffix
	}
	return dir + "/." + base + PartSuffix
}

// IsPartName reports whether base has the form of a part file's name, ".<base>.peerfs-part".
func IsPartName(base string) bool {
	return len(base) > 1+len(PartSuffix) && base[0] == '.' && strings.HasSuffix(base, PartSuffix)
}

// SyncDir syncs the directory dir (relative to root) to stable storage, so that the names
// renamed into it survive a power cut. Where the system keeps directory entries durable by
// itself (NTFS journals them), it only checks that dir is a directory.
func SyncDir(root *os.Root, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := root.OpenFile(dir, os.O_RDONLY|ODirectory, 0)
	if err != nil {
		return err
	}
	err = syncDirFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic replaces the file at path with data (mode 0600) so that a crash leaves the
// old file or the new one, never a torn one: a temporary file beside it, fsynced, renamed
// over, and the directory synced so the new name survives a power cut.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // created 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return SyncDir(r, ".")
}

// os.Root refuses a name that leaves the root ("/x", too many "..", or a symlink whose target
// does either) with an unexported sentinel, os.errPathEscapes, wrapped in *os.PathError or
// *os.LinkError. Go exports no name for it and no syscall.Errno stands behind it, so the
// value itself is captured once per process: every Root refuses "/" with that sentinel before
// making any system call. errors.Is then matches the exact value wherever it is wrapped;
// share's TestEscapeErrorLearned fails if a Go release changes this.
var escapeErr = sync.OnceValue(learnEscapeError)

// learnEscapeError asks a Root on a folder that exists (the temporary one, else the file
// system's root, else the working directory) for "/" and returns the sentinel of its refusal,
// or nil if none of them could be opened.
func learnEscapeError() error {
	for _, dir := range []string{os.TempDir(), "/", "."} {
		r, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		_, err = r.Lstat("/")
		r.Close()
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Err == nil {
			continue
		}
		// Refuse to learn anything that would swallow ordinary errors: an errno or an
		// exported value would turn real failures into refusals.
		var errno syscall.Errno
		if errors.As(pe.Err, &errno) || !strings.Contains(pe.Err.Error(), "escape") {
			continue
		}
		return pe.Err
	}
	return nil
}

// IsEscape reports whether err is os.Root refusing a name that leads outside the root.
func IsEscape(err error) bool {
	sentinel := escapeErr()
	return err != nil && sentinel != nil && errors.Is(err, sentinel)
}
