package serve

import (
	"encoding/binary"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// watch serves WATCH: an empty head reply with more to follow, then one or more EVENTS frames
// per batch of changes, until the peer cancels or the link ends. If the share's watcher stops
// (the share is closed or reopened), the exchange ends with EIO and the peer must watch again;
// if the share is no longer exported to the peer, with ErrnoNoShare.
func (h *Handler) watch(r *rpc.Request, sh *share.Share, _ *wire.ShareReq) {
	sub, err := sh.Subscribe(h.Logger)
	if err != nil {
		h.fail(r, err)
		return
	}
	defer sub.Close()
	if err := r.ReplyMore(nil); err != nil {
		return
	}
	ctx := r.Context()
	var scratch []byte
	send := func(body []byte) error { return r.Send(wire.OpEvents, body) }
	for {
		select {
		case <-ctx.Done(): // the peer's CANCEL, or the link ended: the exchange is over
			return
		case batch, ok := <-sub.C():
			if !ok {
				r.Fail(wire.EIO, "change events of share "+sh.Name()+" stopped: watch it again")
				return
			}
			// A subscription outlives the request that opened it: the share must still be
			// exported to this peer, as that share, for each batch it is sent.
			if cur, ok := h.Lookup(sh.Name()); !ok || cur != sh {
				r.Fail(wire.ErrnoNoShare, "share "+sh.Name()+" is no longer shared with you")
				return
			}
			var err error
			if scratch, err = sendEvents(batch, scratch, send); err != nil {
				return // the link is gone or the exchange was cancelled
			}
		}
	}
}

// sendEvents encodes batch as EVENTS bodies of at most about frameCut bytes each, in order,
// and passes each to send. buf is scratch space, returned for reuse; a body is valid only
// during its send.
func sendEvents(batch []wire.Event, buf []byte, send func(body []byte) error) ([]byte, error) {
	// An EVENTS body is a count followed by the events back to back, so events encoded one by
	// one (each as a batch of one, its count cut off) concatenate into a body.
	body := append(buf[:0], 0, 0, 0, 0)
	count := 0
	var one []byte
	for i := range batch {
		one = (&wire.Events{List: batch[i : i+1]}).AppendTo(one[:0])
		if count > 0 && len(body)+len(one)-4 > frameCut {
			binary.BigEndian.PutUint32(body, uint32(count))
			if err := send(body); err != nil {
				return body, err
			}
			body, count = body[:4], 0
		}
		body = append(body, one[4:]...)
		count++
	}
	if count == 0 {
		return body, nil
	}
	binary.BigEndian.PutUint32(body, uint32(count))
	return body, send(body)
}
