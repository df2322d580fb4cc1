package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sync/errgroup"

	"github.com/peerfs/peerfs/internal/bulk"
	"github.com/peerfs/peerfs/internal/prealloc"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// Pull copies remotePath of share (a file, a symlink or a tree) to dest. If dest is an existing
// directory the copy lands inside it under the remote base name (the share name for the share
// root), like cp and scp; otherwise dest is the new name and its parent must exist.
//
// Receive flow, per file (one goroutine per file in flight; rpc's readLoop decrypts):
//
//  1. quick check: a local file with the remote size and mtime is skipped;
//  2. open ".NAME.peerfs-part"; its length is the resume offset; hash that prefix;
//  3. GET from the offset; its head gives the file's size, and the room the file still needs
//     is reserved (prealloc.Reserve: refused at once if the disk lacks it; what a copy that
//     stops short does not fill is given back);
//  4. each DATA chunk is written at its offset and hashed, then its buffer and credit go back
//     (rpc.InStream.Consumed);
//  5. END carries the owner's size and hash of the whole file: compare, set mode and mtime,
//     sync the data, rename into place, sync the directory (for a tree, each directory once
//     at the end: syncDirs).
func Pull(ctx context.Context, peer remote.Peer, share, remotePath, dest string, opts Options) (*Result, error) {
	opts.defaults()
	st, err := peer.Stat(ctx, share, remotePath)
	if err != nil {
		return nil, err
	}
	base := path.Base(remotePath)
	if remotePath == "" {
		base = share
	}
	target := dest
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		if err := newNameGuard(path.Dir(remotePath)).refuse(base); err != nil {
			return nil, err
		}
		target = filepath.Join(dest, base)
	}
	root, err := os.OpenRoot(filepath.Dir(target))
	if err != nil {
		return nil, fmt.Errorf("opening destination directory: %w", err)
	}
	defer root.Close()

	p := &puller{peer: peer, share: share, root: root, opts: opts, c: newCounters()}
	stop := p.c.report(opts.OnProgress)
	name := filepath.Base(target)
	switch {
	case st.IsRegular():
		p.c.files.Add(1)
		p.c.total.Add(int64(st.Size))
		var sum []byte
		sum, err = p.file(ctx, remotePath, name, st)
		stop()
		res := p.c.result(target)
		res.Hash = sum
		return res, err
	case st.IsSymlink():
		err = p.symlink(name, st.Target)
		if err == nil {
			err = syncDir(root, ".")
		}
	case st.IsDir():
		p.inTree = true
		err = p.tree(ctx, remotePath, name, st)
	default:
		err = fmt.Errorf("%s is not a regular file, directory or symlink", remotePath)
	}
	stop()
	return p.c.result(target), err
}

type puller struct {
	peer    remote.Peer
	share   string
	root    *os.Root // the destination's parent; every local path is relative to it
	opts    Options
	c       *counters
	inTree  bool    // directories are synced once at the end of the tree, not per file
	refused []error // names this computer cannot hold, one error each; appended by walk only
}

type fileJob struct {
	remote, local string
	entry         wire.Entry
}

type dirAttr struct {
	local string
	entry wire.Entry
}

// tree copies a directory: one walker lists directories depth-first and creates them, workers
// copy files; directory modes and mtimes are applied last, deepest first, since creating
// children changes a directory's mtime.
func (p *puller) tree(ctx context.Context, remoteDir, localDir string, st wire.Entry) error {
	var dirs []dirAttr
	err := inParallel(ctx, p.opts.Concurrency,
		func(ctx context.Context, jobs chan<- fileJob) error {
			return p.walk(ctx, remoteDir, localDir, st, jobs, &dirs)
		},
		func(ctx context.Context, j fileJob) error {
			_, err := p.file(ctx, j.remote, j.local, j.entry)
			return err
		})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := p.root.Chmod(d.local, fs.FileMode(d.entry.Mode&0o777)); err != nil {
			return err
		}
		mt := time.Unix(0, d.entry.MtimeNs)
		if err := p.root.Chtimes(d.local, mt, mt); err != nil {
			return err
		}
	}
	if err := p.syncDirs(dirs); err != nil {
		return err
	}
	return errors.Join(p.refused...) // nil if every name could be held
}

// syncDirs syncs every directory of a pulled tree and the one holding it, once each and
// several at a time, after all their files were synced and renamed: the tree is durable when
// the pull reports it done.
func (p *puller) syncDirs(dirs []dirAttr) error {
	var g errgroup.Group
	g.SetLimit(p.opts.Concurrency)
	g.Go(func() error { return syncDir(p.root, ".") })
	for _, d := range dirs {
		g.Go(func() error { return syncDir(p.root, d.local) })
	}
	return g.Wait()
}

func (p *puller) walk(ctx context.Context, remoteDir, localDir string, st wire.Entry, jobs chan<- fileJob, dirs *[]dirAttr) error {
	if err := p.mkdir(localDir); err != nil {
		return err
	}
	p.c.dirs.Add(1)
	*dirs = append(*dirs, dirAttr{localDir, st})
	entries, err := p.peer.ReadDir(ctx, p.share, remoteDir, 0)
	if err != nil {
		return fmt.Errorf("listing %s: %w", remoteDir, err)
	}
	names := newNameGuard(remoteDir)
	for _, e := range entries {
		r, l := wire.Join(remoteDir, e.Name), localDir+"/"+e.Name
		if err := names.refuse(e.Name); err != nil {
			p.refused = append(p.refused, err) // the rest of the tree is still pulled
			continue
		}
		switch {
		case e.IsDir():
			if err := p.walk(ctx, r, l, e, jobs, dirs); err != nil {
				return err
			}
		case e.IsRegular():
			p.c.files.Add(1)
			p.c.total.Add(int64(e.Size))
			select {
			case jobs <- fileJob{r, l, e}:
			case <-ctx.Done():
				return ctx.Err()
			}
		case e.IsSymlink():
			if err := p.symlink(l, e.Target); err != nil {
				return err
			}
		default:
			p.opts.Logger.Info("skipping special file", "path", r)
		}
	}
	return nil
}

// mkdir creates a local directory writable by us for the duration of the transfer.
func (p *puller) mkdir(local string) error {
	err := p.root.Mkdir(local, 0o700)
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := p.root.Lstat(local)
		if lerr != nil || !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", local)
		}
		return p.root.Chmod(local, fi.Mode().Perm()|0o700)
	}
	return err
}

// symlink recreates a link verbatim; an existing link is replaced, anything else is an error.
func (p *puller) symlink(local, target string) error {
	p.c.symlinks.Add(1)
	if fi, err := p.root.Lstat(local); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s exists and is not a symlink", local)
		}
		if old, err := p.root.Readlink(local); err == nil && old == target {
			return nil
		}
		if err := p.root.Remove(local); err != nil {
			return err
		}
	}
	return p.root.Symlink(target, local)
}

// file copies one regular file, resuming a part file and retrying once from scratch if a
// resumed copy does not verify.
func (p *puller) file(ctx context.Context, remotePath, local string, e wire.Entry) ([]byte, error) {
	fi, err := p.root.Lstat(local)
	same := err == nil && fi.Mode().IsRegular() && fi.Size() == int64(e.Size) && fi.ModTime().UnixNano() == e.MtimeNs
	return p.c.copyFile(remotePath, same, func(resume bool) ([]byte, error) {
		return p.fileOnce(ctx, remotePath, local, resume)
	})
}

// errRetryFresh: a resumed copy failed verification; copy again from byte 0.
var errRetryFresh = errors.New("resumed copy did not verify")

func (p *puller) fileOnce(ctx context.Context, remotePath, local string, resume bool) ([]byte, error) {
	dir, base := path.Split(local)
	part := rootfs.PartName(path.Clean(dir), base)
	f, offset, h, err := p.openPart(part, resume)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	e, in, err := p.peer.Get(ctx, p.share, remotePath, uint64(offset), p.opts.Window)
	if err != nil {
		if offset > 0 && remoteErrno(err) == wire.EINVAL { // the source shrank below our part
			return nil, errRetryFresh
		}
		return nil, err
	}
	defer in.Close()
	if e.Size > math.MaxInt64 {
		return nil, fmt.Errorf("the owner announces %d bytes, more than a file can hold", e.Size)
	}
	if err := prealloc.Reserve(f, 0, int64(e.Size)); err != nil {
		if offset == 0 { // a refused fresh copy leaves nothing behind
			f.Close()
			p.root.Remove(part)
		}
		return nil, err
	}
	// A copy that stops short keeps its bytes for the next run, not the rest of its
	// reservation. After the rename f is closed and this does nothing.
	defer prealloc.Release(f, int64(e.Size))
	if offset > 0 {
		p.c.resumed.Add(offset)
	}

	pos, err := bulk.Receive(ctx, in, f, h, uint64(offset), e.Size, func(n int) { p.c.bytes.Add(int64(n)) })
	if err != nil {
		return nil, err
	}
	var end wire.StreamEnd
	if err := end.Decode(in.End()); err != nil {
		return nil, err
	}
	sum := h.Sum(nil)
	if end.Size != pos || string(end.Hash[:]) != string(sum) {
		if offset > 0 {
			return nil, errRetryFresh
		}
		f.Close()
		p.root.Remove(part)
		return nil, fmt.Errorf("%w: received %d bytes hashing %x, owner has %d bytes hashing %x; pull again",
			ErrHashMismatch, pos, sum[:8], end.Size, end.Hash[:8])
	}
	if err := p.commit(f, part, local, e); err != nil {
		return nil, err
	}
	return sum, nil
}

// openPart opens (or creates) the part file part and returns it with the offset to resume
// from, its length with resume and 0 without (the part is then emptied), and a hasher that
// has hashed the bytes before that offset.
func (p *puller) openPart(part string, resume bool) (*os.File, int64, *blake3.Hasher, error) {
	f, err := p.root.OpenFile(part, os.O_RDWR|os.O_CREATE|rootfs.ONoFollow, 0o600)
	if err != nil {
		return nil, 0, nil, err
	}
	var offset int64
	if resume {
		if fi, err := f.Stat(); err == nil {
			offset = fi.Size()
		}
	}
	h := blake3.New()
	if offset > 0 {
		err = hashPrefix(f, offset, h)
		if err != nil {
			err = fmt.Errorf("rereading partial copy: %w", err)
		}
	} else {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	return f, offset, h, nil
}

// commit gives the verified part file f (named part) the mode and mtime of e, syncs and
// closes it, and renames it to local.
func (p *puller) commit(f *os.File, part, local string, e wire.Entry) error {
	// Permission bits only: setuid, setgid and sticky bits are never copied from a peer.
	if err := f.Chmod(fs.FileMode(e.Mode & 0o777)); err != nil {
		return err
	}
	mt := time.Unix(0, e.MtimeNs)
	// The data reaches the disk before the rename gives it the final name; the directory
	// is synced after the rename (syncDir), once per directory for a tree.
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := p.root.Chtimes(part, mt, mt); err != nil {
		return err
	}
	if fi, err := p.root.Lstat(local); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", local)
	}
	if err := p.root.Rename(part, local); err != nil {
		return err
	}
	return p.renamed(path.Dir(local))
}

// renamed makes a name just renamed into dir durable: at once for a single file, at the end
// of the tree (syncDirs) for a tree, where a directory of thousands of files is synced once.
func (p *puller) renamed(dir string) error {
	if p.inTree {
		return nil // tree's syncDirs syncs every directory of the tree and the one holding it
	}
	return syncDir(p.root, dir)
}

// syncDir syncs the directory dir (relative to root) to stable storage, so the names in it
// survive a power cut.
func syncDir(root *os.Root, dir string) error {
	if err := rootfs.SyncDir(root, dir); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
