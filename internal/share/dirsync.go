package share

import (
	"os"
	"sync"

	"github.com/peerfs/peerfs/internal/rootfs"
)

// A file renamed into place is durable once the file was synced before the rename and its
// directory after it. Uploads of a tree commit many files into one directory at once; they
// share directory syncs (group commit): a commit waits for one sync that began after its
// rename, and one sync covers every rename made before it began. 16 uploads in flight into
// one directory then cost about one directory sync per round instead of 16.

// dirSyncs holds the sync state of each directory with a commit waiting, by share-relative
// path; an entry goes once nobody waits on it.
type dirSyncs struct {
	mu   sync.Mutex
	dirs map[string]*dirSync
}

// dirSync is one directory's group commit. Fields guarded by dirSyncs.mu.
type dirSync struct {
	cond    *sync.Cond
	waiters int
	renames uint64 // renames registered so far
	synced  uint64 // renames covered by the last finished sync
	running bool
	err     error // the last finished sync's error
}

// syncDir makes the entry of a file just renamed into the directory dir (share-relative)
// durable: it returns once a sync of dir that began after this call has finished, with that
// sync's error. The directory is opened through os.Root.
func (s *Share) syncDir(dir string) error {
	ds := &s.dirSyncs
	ds.mu.Lock()
	if ds.dirs == nil {
		ds.dirs = map[string]*dirSync{}
	}
	d := ds.dirs[dir]
	if d == nil {
		d = &dirSync{cond: sync.NewCond(&ds.mu)}
		ds.dirs[dir] = d
	}
	d.waiters++
	d.renames++
	mine := d.renames
	for d.synced < mine {
		if d.running {
			d.cond.Wait()
			continue
		}
		d.running = true
		covers := d.renames
		ds.mu.Unlock()
		err := rootfs.SyncDir(s.root, dir)
		ds.mu.Lock()
		d.running, d.synced, d.err = false, covers, err
		d.cond.Broadcast()
	}
	err := d.err
	if d.waiters--; d.waiters == 0 {
		delete(ds.dirs, dir)
	}
	ds.mu.Unlock()
	return err
}

// SyncClose syncs the part file f of an upload to stable storage and closes it: the data must
// be on the disk before the rename makes it the file (CommitPart).
func SyncClose(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
