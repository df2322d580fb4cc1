package remote

import (
	"context"
	"fmt"
	"testing"

	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// listingOwner answers READDIR, and LIST unless it plays a peer that predates LIST, with
// n entries, one per frame.
type listingOwner struct {
	n      int
	noList bool
	ops    []wire.Op // the listing requests it received
}

func (o *listingOwner) ServeRequest(r *rpc.Request) {
	o.ops = append(o.ops, r.Op)
	switch {
	case r.Op == wire.OpList && !o.noList:
		var m wire.ListReq
		if err := m.Decode(r.Payload()); err != nil {
			r.Fail(wire.ErrnoProtocol, err.Error())
			return
		}
		r.Pace(m.Window)
	case r.Op != wire.OpReadDir:
		r.Fail(wire.ErrnoUnsupported, "unknown request") // what a peer that predates LIST answers
		return
	}
	for i := range o.n {
		e := wire.Entry{Name: fmt.Sprint("f", i), Mode: wire.ModeRegular | 0o644, Nlink: 1}
		body := (&wire.Entries{List: []wire.Entry{e}}).AppendTo(nil)
		if i == o.n-1 {
			r.Reply(body)
		} else {
			r.ReplyMore(body)
		}
	}
}

func sessionTo(t *testing.T, h rpc.Handler) *rpc.Session {
	t.Helper()
	ca, cb := loopback.Pair(t)
	var sb *rpc.Session
	var errb error
	ready := make(chan struct{})
	go func() {
		sb, errb = rpc.New(cb, rpc.Options{Name: "owner", Handler: h})
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

// ReadDir lists with LIST, and with READDIR from a peer that refuses LIST as unknown.
func TestReadDirFallsBackToReadDirForOlderPeers(t *testing.T) {
	for _, old := range []bool{false, true} {
		o := &listingOwner{n: 3, noList: old}
		p := Peer{S: sessionTo(t, o)}
		list, err := p.ReadDir(context.Background(), "s", "", 0)
		if err != nil {
			t.Fatalf("older peer %v: %v", old, err)
		}
		if len(list) != 3 || list[0].Name != "f0" || list[2].Name != "f2" {
			t.Fatalf("older peer %v: listed %v", old, list)
		}
		want := []wire.Op{wire.OpList}
		if old {
			want = append(want, wire.OpReadDir)
		}
		if fmt.Sprint(o.ops) != fmt.Sprint(want) {
			t.Errorf("older peer %v: requests %v, want %v", old, o.ops, want)
		}
	}
}
