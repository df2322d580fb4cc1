package remote

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// applyOwner answers APPLY as an owner would for a journal it has applied up to First-1:
// every op applied, its result body the op's own body reversed. old plays a peer that
// predates APPLY; garbage answers with a reply that does not decode.
type applyOwner struct {
	old, garbage bool
	mu           sync.Mutex
	got          []wire.ApplyReq
}

func (o *applyOwner) ServeRequest(r *rpc.Request) {
	if r.Op != wire.OpApply || o.old {
		r.Fail(wire.ErrnoUnsupported, "request "+r.Op.String()+" is not supported by this peer")
		return
	}
	var req wire.ApplyReq
	if err := req.Decode(r.Payload()); err != nil {
		r.Fail(wire.ErrnoProtocol, err.Error())
		return
	}
	o.mu.Lock()
	o.got = append(o.got, req)
	o.mu.Unlock()
	if o.garbage {
		r.Reply([]byte{1, 2, 3})
		return
	}
	resp := wire.ApplyResp{Applied: req.First + uint64(len(req.Ops)) - 1}
	if req.Flags&wire.ApplySync != 0 {
		resp.Durable = resp.Applied
	}
	for _, op := range req.Ops {
		body := bytes.Clone(op.Body)
		for i, j := 0, len(body)-1; i < j; i, j = i+1, j-1 {
			body[i], body[j] = body[j], body[i]
		}
		resp.Results = append(resp.Results, wire.ApplyResult{Body: body[:min(len(body), 64)]})
	}
	r.Reply(resp.AppendTo(nil))
}

func applySample() wire.ApplyReq {
	big := bytes.Repeat([]byte("0123456789abcdef"), wire.MaxChunk/16)
	return wire.ApplyReq{
		Share:   "other",
		Journal: wire.JournalID{7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		First:   41,
		Flags:   wire.ApplySync,
		Ops: []wire.ApplyOp{
			{Op: wire.OpMkdir, Body: (&wire.MkdirReq{Path: "d", Mode: 0o755}).AppendTo(nil)},
			{Op: wire.OpWrite, Flags: wire.ApplyHasBase, Base: wire.FileState{Size: 9, MtimeNs: -3, CtimeNs: 5}, Body: []byte("head")},
			{Op: wire.OpWrite, Body: big}, // one full chunk: the frame takes the largest buffer class
		},
	}
}

// Share.Apply sends the batch as it was given, naming the Share's share, and decodes the
// owner's marks and results.
func TestShareApply(t *testing.T) {
	o := &applyOwner{}
	s := NewShare(&fakeLink{sess: sessionTo(t, o)}, "docs")
	req := applySample()
	resp, err := s.Apply(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.got) != 1 {
		t.Fatalf("the owner got %d APPLY requests, want 1", len(o.got))
	}
	got := o.got[0]
	if got.Share != "docs" {
		t.Errorf("APPLY named share %q, want docs", got.Share)
	}
	req.Share = "docs"
	if !reflect.DeepEqual(got, req) {
		t.Errorf("the owner decoded journal %v first %d flags %d, ops %+v;\nsent %v %d %d, %+v",
			got.Journal, got.First, got.Flags, got.Ops[:2], req.Journal, req.First, req.Flags, req.Ops[:2])
	}
	if resp.Applied != 43 || resp.Durable != 43 || len(resp.Results) != 3 || string(resp.Results[1].Body) != "daeh" {
		t.Errorf("reply: applied %d durable %d, %d results %q", resp.Applied, resp.Durable, len(resp.Results), resp.Results)
	}
}

// A peer that predates APPLY answers UNSUPPORTED: the caller can tell.
func TestApplyUnsupported(t *testing.T) {
	p := Peer{S: sessionTo(t, &applyOwner{old: true})}
	_, err := p.Apply(context.Background(), applySample())
	var re *wire.RemoteError
	if !errors.As(err, &re) || re.Code != wire.ErrnoUnsupported || !errors.Is(err, wire.ErrnoUnsupported) {
		t.Fatalf("APPLY to an older peer: %v, want a RemoteError UNSUPPORTED", err)
	}
}

// A reply that does not decode is an error naming APPLY; a batch past the frame limit is
// refused before anything is sent.
func TestApplyBadReplyAndTooLarge(t *testing.T) {
	o := &applyOwner{garbage: true}
	p := Peer{S: sessionTo(t, o)}
	_, err := p.Apply(context.Background(), applySample())
	if err == nil || !strings.Contains(err.Error(), "APPLY reply") || !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("undecodable reply: %v", err)
	}
	req := applySample()
	req.Ops = append(req.Ops, req.Ops[2])
	if _, err := p.Apply(context.Background(), req); err == nil || !strings.Contains(err.Error(), "frame limit") {
		t.Fatalf("two full chunks in one APPLY: %v, want a frame-limit error", err)
	}
	if len(o.got) != 1 {
		t.Errorf("the owner got %d requests, want only the first", len(o.got))
	}
}
