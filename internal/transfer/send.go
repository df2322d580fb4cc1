package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/zeebo/blake3"

	"github.com/peerfs/peerfs/internal/bulk"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/wire"
)

// Send copies source (a local file, symlink or tree) into dir of a peer's share, under its base
// name. Files the share already holds with the same size and mtime are skipped; the owner keeps
// a partial upload and reports its length, so a rerun resumes.
//
// Send flow, per file: PUT announces size, mode and mtime and learns the resume offset; the
// local prefix is hashed; chunks are read into pooled frame buffers, hashed and sent within the
// owner's credit; END carries the whole file's hash, and the owner renames the file into place
// only if it matches (its verdict comes back as END or ERROR).
func Send(ctx context.Context, peer remote.Peer, source, share, dir string, opts Options) (*Result, error) {
	opts.defaults()
	fi, err := os.Lstat(source)
	if err != nil {
		return nil, err
	}
	target := wire.Join(dir, filepath.Base(source))
	if err := wire.CheckPath(target); err != nil {
		return nil, err
	}
	s := &sender{peer: peer, share: share, opts: opts, c: newCounters()}
	stop := s.c.report(opts.OnProgress)
	switch {
	case fi.Mode().IsRegular():
		s.c.files.Add(1)
		s.c.total.Add(fi.Size())
		var sum []byte
		sum, err = s.file(ctx, source, target, fi, nil)
		stop()
		res := s.c.result(target)
		res.Hash = sum
		return res, err
	case fi.Mode()&fs.ModeSymlink != 0:
		err = s.symlink(ctx, source, target)
	case fi.IsDir():
		err = s.tree(ctx, source, target, fi)
	default:
		err = fmt.Errorf("%s is not a regular file, directory or symlink", source)
	}
	stop()
	return s.c.result(target), err
}

type sender struct {
	peer  remote.Peer
	share string
	opts  Options
	c     *counters
}

type sendJob struct {
	local, remote string
	info          fs.FileInfo
	have          *wire.Entry // what the share already holds, if anything
}

func (s *sender) tree(ctx context.Context, localDir, remoteDir string, fi fs.FileInfo) error {
	var dirs []sendJob
	err := inParallel(ctx, s.opts.Concurrency,
		func(ctx context.Context, jobs chan<- sendJob) error {
			return s.walk(ctx, localDir, remoteDir, fi, jobs, &dirs)
		},
		func(ctx context.Context, j sendJob) error {
			_, err := s.file(ctx, j.local, j.remote, j.info, j.have)
			return err
		})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		_, err := s.peer.SetAttr(ctx, wire.SetAttrReq{
			Share: s.share, Path: d.remote, Valid: wire.SetMode | wire.SetMtime,
			Mode: uint32(d.info.Mode().Perm()), MtimeNs: d.info.ModTime().UnixNano(),
		})
		if err != nil {
			return fmt.Errorf("setting attributes of %s: %w", d.remote, err)
		}
	}
	return nil
}

func (s *sender) walk(ctx context.Context, localDir, remoteDir string, fi fs.FileInfo, jobs chan<- sendJob, dirs *[]sendJob) error {
	// Writable by us while we fill it; the real mode is set at the end.
	if _, err := s.peer.Mkdir(ctx, s.share, remoteDir, uint32(fi.Mode().Perm())|0o700, 0); err != nil {
		return fmt.Errorf("creating %s: %w", remoteDir, err)
	}
	s.c.dirs.Add(1)
	*dirs = append(*dirs, sendJob{local: localDir, remote: remoteDir, info: fi})
	have := map[string]wire.Entry{}
	if list, err := s.peer.ReadDir(ctx, s.share, remoteDir, 0); err == nil {
		for _, e := range list {
			have[e.Name] = e
		}
	}
	entries, err := os.ReadDir(localDir)
	if err != nil {
		return err
	}
	for _, de := range entries {
		l, r := filepath.Join(localDir, de.Name()), wire.Join(remoteDir, de.Name())
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			if err := s.walk(ctx, l, r, info, jobs, dirs); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			s.c.files.Add(1)
			s.c.total.Add(info.Size())
			j := sendJob{local: l, remote: r, info: info}
			if e, ok := have[de.Name()]; ok {
				j.have = &e
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
		case info.Mode()&fs.ModeSymlink != 0:
			if err := s.symlink(ctx, l, r); err != nil {
				return err
			}
		default:
			s.opts.Logger.Info("skipping special file", "path", l)
		}
	}
	return nil
}

func (s *sender) symlink(ctx context.Context, local, remotePath string) error {
	target, err := os.Readlink(local)
	if err != nil {
		return err
	}
	s.c.symlinks.Add(1)
	_, err = s.peer.Symlink(ctx, s.share, remotePath, target, 0)
	return err
}

func (s *sender) file(ctx context.Context, local, remotePath string, fi fs.FileInfo, have *wire.Entry) ([]byte, error) {
	same := have != nil && have.IsRegular() && int64(have.Size) == fi.Size() && have.MtimeNs == fi.ModTime().UnixNano()
	return s.c.copyFile(local, same, func(resume bool) ([]byte, error) {
		return s.fileOnce(ctx, local, remotePath, resume)
	})
}

func (s *sender) fileOnce(ctx context.Context, local, remotePath string, resume bool) ([]byte, error) {
	f, err := os.Open(local)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	req := wire.PutReq{Share: s.share, Path: remotePath, Size: uint64(size),
		Mode: uint32(fi.Mode().Perm()), MtimeNs: fi.ModTime().UnixNano()}
	if resume {
		req.Flags = wire.PutResume
	}
	offset, out, err := s.peer.Put(ctx, req)
	if err != nil {
		return nil, err
	}
	if offset > uint64(size) {
		out.Abort()
		return nil, errRetryFresh
	}
	h := blake3.New()
	if err := hashPrefix(f, int64(offset), h); err != nil {
		out.Abort()
		return nil, err
	}
	if offset > 0 {
		s.c.resumed.Add(int64(offset))
	}
	err = bulk.Send(ctx, out, f, offset, uint64(size), h, func(n int) { s.c.bytes.Add(int64(n)) })
	var rerr *bulk.ReadError
	if err != nil && !errors.As(err, &rerr) {
		return nil, err
	}
	if err != nil {
		out.Abort()
		if errors.Is(err, bulk.ErrShrank) {
			return nil, fmt.Errorf("%w: %s shrank while being sent", ErrChanged, local)
		}
		return nil, err
	}
	if now, err := f.Stat(); err != nil || now.Size() != size || !now.ModTime().Equal(fi.ModTime()) {
		out.Abort()
		return nil, fmt.Errorf("%w: %s was modified while being sent; send again", ErrChanged, local)
	}
	end := wire.StreamEnd{Size: uint64(size)}
	sum := h.Sum(nil)
	copy(end.Hash[:], sum)
	if err := out.End(end.AppendTo(nil)); err != nil {
		return nil, err
	}
	verdict, err := out.Finish()
	verdict.Release()
	if err != nil {
		if offset > 0 && remoteErrno(err) == wire.ErrnoHashMismatch {
			return nil, errRetryFresh
		}
		return nil, err
	}
	return sum, nil
}
