package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// fakeOwner answers STAT, SETATTR, CREATE and STREAM over a real session, recording the share
// each request names. STREAM pushes data, a file of that many bytes, in one chunk.
type fakeOwner struct {
	data   []byte
	mu     sync.Mutex
	shares []string
}

func (o *fakeOwner) named(share string) {
	o.mu.Lock()
	o.shares = append(o.shares, share)
	o.mu.Unlock()
}

// shareOf decodes a request of an op fakeOwner serves and returns the share it names.
var shareOf = map[wire.Op]func(b []byte) string{
	wire.OpStat:    func(b []byte) string { var m wire.PathReq; m.Decode(b); return m.Share },
	wire.OpSetAttr: func(b []byte) string { var m wire.SetAttrReq; m.Decode(b); return m.Share },
	wire.OpCreate:  func(b []byte) string { var m wire.CreateReq; m.Decode(b); return m.Share },
}

func (o *fakeOwner) ServeRequest(r *rpc.Request) {
	e := wire.Entry{Mode: wire.ModeRegular | 0o644, Size: uint64(len(o.data)), Ino: 9, Nlink: 1}
	if r.Op == wire.OpStream {
		o.stream(r, &e)
		return
	}
	decode := shareOf[r.Op]
	if decode == nil {
		r.Fail(wire.ErrnoUnsupported, "not in this test")
		return
	}
	o.named(decode(r.Payload()))
	if r.Op == wire.OpSetAttr {
		resp := wire.ChangeResp{Entry: e}
		r.Reply(resp.AppendTo(nil))
		return
	}
	r.Reply(e.AppendTo(nil))
}

// stream answers a STREAM with the whole file in one chunk.
func (o *fakeOwner) stream(r *rpc.Request, e *wire.Entry) {
	var m wire.StreamReq
	m.Decode(r.Payload())
	o.named(m.Share)
	out, err := r.Push(e.AppendTo(nil), m.Window)
	if err != nil {
		return
	}
	buf, err := out.GetChunk(len(o.data))
	if err != nil {
		return
	}
	copy(buf.Payload()[wire.DataHeaderLen:], o.data)
	if out.Send(buf, 0) == nil {
		out.End(nil)
	}
}

// fakeLink counts the calls it gives the link to and those that ended.
type fakeLink struct {
	sess        *rpc.Session
	err         error
	links, done atomic.Int32
}

func (l *fakeLink) Link(ctx context.Context, _ Patience) (*rpc.Session, context.Context, func(), error) {
	if l.err != nil {
		return nil, nil, nil, l.err
	}
	l.links.Add(1)
	return l.sess, ctx, func() { l.done.Add(1) }, nil
}

func serve(t *testing.T, o *fakeOwner) *rpc.Session {
	t.Helper()
	ca, cb := loopback.Pair(t)
	var sb *rpc.Session
	var errb error
	ready := make(chan struct{})
	go func() {
		sb, errb = rpc.New(cb, rpc.Options{Name: "owner", Handler: o})
		close(ready)
	}()
	sa, err := rpc.New(ca, rpc.Options{Name: "mount"})
	<-ready
	if err != nil || errb != nil {
		t.Fatalf("rpc.New: %v / %v", err, errb)
	}
	t.Cleanup(func() { sa.Close(nil); sb.Close(nil) })
	return sa
}

// Every request of a Share names its share, whatever the caller's request said, and gives the
// link back once it is answered.
func TestShareNamesItsShare(t *testing.T) {
	o := &fakeOwner{}
	l := &fakeLink{sess: serve(t, o)}
	s := NewShare(l, "docs")
	ctx := context.Background()
	if _, err := s.Stat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttr(ctx, wire.SetAttrReq{Share: "other", Path: "a", Valid: wire.SetMode}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWith(ctx, wire.CreateReq{Path: "b", Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fsync(ctx, "a", false); err == nil {
		t.Error("a request the owner refuses did not fail")
	}
	for i, name := range o.shares {
		if name != "docs" {
			t.Errorf("request %d named share %q, want docs", i, name)
		}
	}
	if len(o.shares) != 3 {
		t.Errorf("the owner saw %d requests naming a share, want 3", len(o.shares))
	}
	if l.links.Load() != 4 || l.done.Load() != 4 {
		t.Errorf("%d calls took the link and %d gave it back, want 4 and 4", l.links.Load(), l.done.Load())
	}
}

// A call without a link fails with the Linker's error and sends nothing.
func TestShareWithoutLink(t *testing.T) {
	down := errors.New("peer unreachable")
	s := NewShare(&fakeLink{err: down}, "docs")
	if _, err := s.Stat(context.Background(), "a"); !errors.Is(err, down) {
		t.Fatalf("Stat without a link: %v, want %v", err, down)
	}
	if _, _, err := s.Stream(context.Background(), "a", 0, 10); !errors.Is(err, down) {
		t.Fatalf("Stream without a link: %v, want %v", err, down)
	}
}

// A STREAM keeps its link until it is closed, and delivers the owner's bytes.
func TestShareStreamHoldsItsLink(t *testing.T) {
	o := &fakeOwner{data: bytes.Repeat([]byte("peerfs"), 1000)}
	l := &fakeLink{sess: serve(t, o)}
	s := NewShare(l, "docs")
	ctx := context.Background()
	e, cs, err := s.Stream(ctx, "f", 0, int64(len(o.data)))
	if err != nil {
		t.Fatal(err)
	}
	if e.Size != uint64(len(o.data)) {
		t.Errorf("STREAM head says %d bytes, want %d", e.Size, len(o.data))
	}
	c, err := cs.Next(ctx)
	if err != nil || c.Off != 0 || !bytes.Equal(c.Data, o.data) {
		t.Fatalf("first chunk: off %d, %d bytes, %v", c.Off, len(c.Data), err)
	}
	cs.Release(c)
	if _, err := cs.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after the data: %v, want io.EOF", err)
	}
	if l.done.Load() != 0 {
		t.Error("the stream gave its link back before it was closed")
	}
	cs.Close()
	cs.Close()
	if l.done.Load() != 1 {
		t.Errorf("the link was given back %d times after Close, want once", l.done.Load())
	}
	if o.shares[0] != "docs" {
		t.Errorf("STREAM named share %q, want docs", o.shares[0])
	}
}
