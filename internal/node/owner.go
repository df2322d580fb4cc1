//go:build !windows

package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/fetch"
	"github.com/peerfs/peerfs/internal/fusefs"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// mountOwner is fusefs.Owner over the node's link to the peer: every call waits a bounded
// time for the link, then fails (EIO to the application).
type mountOwner struct {
	p     *peer
	share string
	wait  time.Duration
}

var errLinkDown = errors.New("peer unreachable")

// rp waits for the link (an interrupted wait returns EINTR) and returns the context for the
// call itself, which a signal does not cancel: a local filesystem does not fail lstat or
// rmdir with EINTR, and programs (stress-ng, make) do not expect it. A dead link still ends
// the call, through keepalive. use.done must be called when the call is over: until then a
// link being replaced stays open for it (rekey.go).
func (o *mountOwner) rp(ctx context.Context) (rp remote.Peer, callCtx context.Context, use *linkUse, err error) {
	sess, use, err := o.p.acquire(ctx, o.wait)
	if err != nil {
		return remote.Peer{}, nil, nil, fmt.Errorf("%w: %w", errLinkDown, err) // an interrupted wait stays EINTR
	}
	return remote.Peer{S: sess}, context.WithoutCancel(ctx), use, nil
}

// The fusefs.Owner methods: each waits for the link, then makes one call on the share.

var _ fusefs.Owner = (*mountOwner)(nil)

func (o *mountOwner) Stat(ctx context.Context, path string) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Stat(ctx, o.share, path)
}

func (o *mountOwner) ReadDir(ctx context.Context, path string, inlineMax uint32) ([]wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return nil, err
	}
	return rp.ReadDir(ctx, o.share, path, inlineMax)
}

func (o *mountOwner) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return 0, err
	}
	return rp.Read(ctx, o.share, path, uint64(off), dst)
}

func (o *mountOwner) Write(ctx context.Context, path string, off int64, data []byte) (wire.ChangeResp, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.ChangeResp{}, err
	}
	return rp.Write(ctx, o.share, path, uint64(off), data)
}

func (o *mountOwner) Create(ctx context.Context, path string, mode, flags uint32) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Create(ctx, o.share, path, mode, flags)
}

func (o *mountOwner) CreateWith(ctx context.Context, req wire.CreateReq) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	req.Share = o.share
	return rp.CreateWith(ctx, req)
}

// Mkdir and Symlink are exclusive, as mkdir(2) and symlink(2) are: the mount's replica may not
// know yet of a name another device just made there.
func (o *mountOwner) Mkdir(ctx context.Context, path string, mode uint32) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Mkdir(ctx, o.share, path, mode, wire.NameExclusive)
}

func (o *mountOwner) Symlink(ctx context.Context, path, target string) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Symlink(ctx, o.share, path, target, wire.NameExclusive)
}

func (o *mountOwner) Link(ctx context.Context, from, to string) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Link(ctx, o.share, from, to)
}

func (o *mountOwner) Unlink(ctx context.Context, path string) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.Unlink(ctx, o.share, path)
}

func (o *mountOwner) Rmdir(ctx context.Context, path string) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.Rmdir(ctx, o.share, path)
}

func (o *mountOwner) Rename(ctx context.Context, from, to string, flags uint32) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.Rename(ctx, o.share, from, to, flags)
}

func (o *mountOwner) SetAttr(ctx context.Context, req wire.SetAttrReq) (wire.ChangeResp, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.ChangeResp{}, err
	}
	req.Share = o.share
	return rp.SetAttr(ctx, req)
}

func (o *mountOwner) Mknod(ctx context.Context, path string, mode uint32, rdev uint64) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Mknod(ctx, o.share, path, mode, rdev)
}

func (o *mountOwner) Fallocate(ctx context.Context, path string, mode uint32, off, length int64) (wire.Entry, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Entry{}, err
	}
	return rp.Fallocate(ctx, o.share, path, mode, uint64(off), uint64(length))
}

func (o *mountOwner) Fsync(ctx context.Context, path string, dataOnly bool) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.Fsync(ctx, o.share, path, dataOnly)
}

func (o *mountOwner) Statfs(ctx context.Context) (wire.Statfs, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return wire.Statfs{}, err
	}
	return rp.Statfs(ctx, o.share)
}

func (o *mountOwner) GetXattr(ctx context.Context, path, name string) ([]byte, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return nil, err
	}
	return rp.GetXattr(ctx, o.share, path, name)
}

func (o *mountOwner) ListXattr(ctx context.Context, path string) ([]string, error) {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return nil, err
	}
	return rp.ListXattr(ctx, o.share, path)
}

func (o *mountOwner) SetXattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.SetXattr(ctx, o.share, path, name, value, flags)
}

func (o *mountOwner) RemoveXattr(ctx context.Context, path, name string) error {
	rp, ctx, use, err := o.rp(ctx)
	defer use.done()
	if err != nil {
		return err
	}
	return rp.RemoveXattr(ctx, o.share, path, name)
}

func (o *mountOwner) Stream(ctx context.Context, path string, off, length int64) (wire.Entry, fetch.ChunkStream, error) {
	rp, ctx, use, err := o.rp(ctx)
	if err != nil {
		return wire.Entry{}, nil, err
	}
	e, in, err := rp.Stream(ctx, o.share, path, uint64(off), uint64(length), fetch.StreamWindow)
	if err != nil {
		use.done()
		return wire.Entry{}, nil, err
	}
	return e, &chunkStream{in: in, use: use}, nil
}

// chunkStream adapts an rpc.InStream to fetch.ChunkStream. It holds its link (use) until it
// closes.
type chunkStream struct {
	in     *rpc.InStream
	use    *linkUse
	closed bool
}

func (s *chunkStream) Next(ctx context.Context) (fetch.Chunk, error) {
	buf, off, data, err := s.in.Next(ctx)
	if err != nil {
		return fetch.Chunk{}, err
	}
	return fetch.Chunk{Off: int64(off), Data: data, Token: buf}, nil
}

func (s *chunkStream) Release(c fetch.Chunk) {
	if buf, ok := c.Token.(*rpc.Buffer); ok {
		s.in.Consumed(buf, len(c.Data))
	}
}

func (s *chunkStream) Close() {
	s.in.Close()
	if !s.closed {
		s.closed = true
		s.use.done()
	}
}
