package remote

import (
	"context"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// Linker gives a Share the link for one call. Link waits a bounded time for the link (how
// long depends on the call's Patience), then fails; callCtx is the context for the call
// itself; done is called once the call (for a STREAM, the stream) is over, also after an
// error.
type Linker interface {
	Link(ctx context.Context, p Patience) (sess *rpc.Session, callCtx context.Context, done func(), err error)
}

// Patience is how a call bears a lost link.
type Patience uint8

const (
	// Patient calls (a mount's changes) wait the mount's whole bound for a lost link to come
	// back: an application's write survives a short outage.
	Patient Patience = iota
	// Impatient calls (reads, listings, attributes, a journal's batches) give up at once when
	// the peer could not be reached at its last try: offline, what the mount has not cached
	// fails fast instead of hanging, and a journal retries by itself.
	Impatient
)

// Share is one share of a peer as a mount uses it: every call takes the link from its Linker
// and makes one request naming the share, the only place a mount's requests get their share
// name. Paths are share-relative; errors carry the owner's errno (*wire.RemoteError).
type Share struct {
	link Linker
	name string
}

// NewShare returns share name of the peer that link reaches.
func NewShare(link Linker, name string) *Share { return &Share{link: link, name: name} }

// Name is the share's name.
func (s *Share) Name() string { return s.name }

// call runs f on the link, patiently (a change).
func call[T any](s *Share, ctx context.Context, f func(p Peer, ctx context.Context) (T, error)) (T, error) {
	return callWith(s, ctx, Patient, f)
}

// ask runs f on the link, impatiently (a question).
func ask[T any](s *Share, ctx context.Context, f func(p Peer, ctx context.Context) (T, error)) (T, error) {
	return callWith(s, ctx, Impatient, f)
}

func callWith[T any](s *Share, ctx context.Context, pat Patience, f func(p Peer, ctx context.Context) (T, error)) (T, error) {
	sess, callCtx, done, err := s.link.Link(ctx, pat)
	if err != nil {
		var zero T
		return zero, err
	}
	defer done()
	return f(Peer{S: sess}, callCtx)
}

// callErr is call for requests answered without a body.
func callErr(s *Share, ctx context.Context, f func(p Peer, ctx context.Context) error) error {
	_, err := call(s, ctx, func(p Peer, ctx context.Context) (struct{}, error) { return struct{}{}, f(p, ctx) })
	return err
}

func (s *Share) Stat(ctx context.Context, path string) (wire.Entry, error) {
	return ask(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) { return p.Stat(ctx, s.name, path) })
}

// List hands the entries of directory path to add a reply frame at a time (Peer.List).
func (s *Share) List(ctx context.Context, path string, inlineMax uint32, add func([]wire.Entry) error) error {
	_, err := ask(s, ctx, func(p Peer, ctx context.Context) (struct{}, error) {
		return struct{}{}, p.List(ctx, s.name, path, inlineMax, add)
	})
	return err
}

func (s *Share) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	return ask(s, ctx, func(p Peer, ctx context.Context) (int, error) { return p.Read(ctx, s.name, path, uint64(off), dst) })
}

func (s *Share) Write(ctx context.Context, path string, off int64, data []byte) (wire.ChangeResp, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.ChangeResp, error) {
		return p.Write(ctx, s.name, path, uint64(off), data)
	})
}

func (s *Share) Create(ctx context.Context, path string, mode, flags uint32) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) {
		return p.Create(ctx, s.name, path, mode, flags)
	})
}

// CreateWith sends req, a CREATE with its first data or its times, for this share.
func (s *Share) CreateWith(ctx context.Context, req wire.CreateReq) (wire.Entry, error) {
	req.Share = s.name
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) { return p.CreateWith(ctx, req) })
}

// Mkdir and Symlink are exclusive, as mkdir(2) and symlink(2) are: a mount's replica may not
// know yet of a name another device just made there.
func (s *Share) Mkdir(ctx context.Context, path string, mode uint32) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) {
		return p.Mkdir(ctx, s.name, path, mode, wire.NameExclusive)
	})
}

func (s *Share) Symlink(ctx context.Context, path, target string) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) {
		return p.Symlink(ctx, s.name, path, target, wire.NameExclusive)
	})
}

func (s *Share) Link(ctx context.Context, from, to string) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) { return p.Link(ctx, s.name, from, to) })
}

func (s *Share) Unlink(ctx context.Context, path string) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error { return p.Unlink(ctx, s.name, path) })
}

func (s *Share) Rmdir(ctx context.Context, path string) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error { return p.Rmdir(ctx, s.name, path) })
}

func (s *Share) Rename(ctx context.Context, from, to string, flags uint32) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error { return p.Rename(ctx, s.name, from, to, flags) })
}

// SetAttr applies req for this share.
func (s *Share) SetAttr(ctx context.Context, req wire.SetAttrReq) (wire.ChangeResp, error) {
	req.Share = s.name
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.ChangeResp, error) { return p.SetAttr(ctx, req) })
}

func (s *Share) Fallocate(ctx context.Context, path string, mode uint32, off, length int64) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) {
		return p.Fallocate(ctx, s.name, path, mode, uint64(off), uint64(length))
	})
}

func (s *Share) Mknod(ctx context.Context, path string, mode uint32, rdev uint64) (wire.Entry, error) {
	return call(s, ctx, func(p Peer, ctx context.Context) (wire.Entry, error) {
		return p.Mknod(ctx, s.name, path, mode, rdev)
	})
}

func (s *Share) Fsync(ctx context.Context, path string, dataOnly bool) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error { return p.Fsync(ctx, s.name, path, dataOnly) })
}

// Apply sends req, a batch of the mount's journal, for this share (Peer.Apply: a peer that
// predates APPLY answers wire.ErrnoUnsupported).
func (s *Share) Apply(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error) {
	req.Share = s.name
	return ask(s, ctx, func(p Peer, ctx context.Context) (wire.ApplyResp, error) { return p.Apply(ctx, req) })
}

func (s *Share) Statfs(ctx context.Context) (wire.Statfs, error) {
	return ask(s, ctx, func(p Peer, ctx context.Context) (wire.Statfs, error) { return p.Statfs(ctx, s.name) })
}

func (s *Share) GetXattr(ctx context.Context, path, name string) ([]byte, error) {
	return ask(s, ctx, func(p Peer, ctx context.Context) ([]byte, error) { return p.GetXattr(ctx, s.name, path, name) })
}

func (s *Share) ListXattr(ctx context.Context, path string) ([]string, error) {
	return ask(s, ctx, func(p Peer, ctx context.Context) ([]string, error) { return p.ListXattr(ctx, s.name, path) })
}

func (s *Share) SetXattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error {
		return p.SetXattr(ctx, s.name, path, name, value, flags)
	})
}

func (s *Share) RemoveXattr(ctx context.Context, path, name string) error {
	return callErr(s, ctx, func(p Peer, ctx context.Context) error { return p.RemoveXattr(ctx, s.name, path, name) })
}

// StreamWindow is the credit a Share grants a STREAM: what the owner may push beyond what
// the mount consumed; enough to keep a loopback or LAN link busy while the mount writes
// earlier chunks into its cache.
const StreamWindow = 8 << 20

// Chunk is one piece of a STREAM, valid until the stream's Release of it.
type Chunk struct {
	Off  int64
	Data []byte
	buf  *rpc.Buffer // nil for a chunk that did not come off a link
}

// ChunkStream delivers a STREAM's chunks in order. One goroutine calls Next and Close; one
// goroutine (the same or another) releases the chunks, in the order Next returned them.
type ChunkStream interface {
	// Next returns the next chunk. At the end of the stream it returns io.EOF.
	Next(ctx context.Context) (Chunk, error)
	// Release gives a chunk's buffer back and grants its bytes to the owner as credit.
	Release(c Chunk)
	// Close ends the stream, cancelling it on the owner if it has not ended.
	Close()
}

// Stream starts pushing [off, off+length) of path, cut at its end (STREAM), and returns the
// file's attributes as the owner saw them at the start. The stream holds its link until it
// is closed.
func (s *Share) Stream(ctx context.Context, path string, off, length int64) (wire.Entry, ChunkStream, error) {
	sess, callCtx, done, err := s.link.Link(ctx, Impatient)
	if err != nil {
		return wire.Entry{}, nil, err
	}
	e, in, err := Peer{S: sess}.Stream(callCtx, s.name, path, uint64(off), uint64(length), StreamWindow)
	if err != nil {
		done()
		return wire.Entry{}, nil, err
	}
	return e, &inStream{in: in, done: done}, nil
}

// inStream is a ChunkStream over an rpc.InStream.
type inStream struct {
	in     *rpc.InStream
	done   func()
	closed bool
}

func (s *inStream) Next(ctx context.Context) (Chunk, error) {
	buf, off, data, err := s.in.Next(ctx)
	if err != nil {
		return Chunk{}, err
	}
	return Chunk{Off: int64(off), Data: data, buf: buf}, nil
}

func (s *inStream) Release(c Chunk) {
	if c.buf != nil {
		s.in.Consumed(c.buf, len(c.Data))
	}
}

func (s *inStream) Close() {
	s.in.Close()
	if !s.closed {
		s.closed = true
		s.done()
	}
}
