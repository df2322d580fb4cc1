package remote

import (
	"context"
	"fmt"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// Watch subscribes to the changes of share on the peer. It returns once the owner has answered
// (ctx bounds that wait only); read the batches with NextEvents and end with Close. Events
// start with changes made after the answer; a mount that was caching before must rescan.
func (p Peer) Watch(ctx context.Context, share string) (*rpc.Subscription, error) {
	req := wire.ShareReq{Share: share}
	return p.S.Subscribe(ctx, wire.OpWatch, req.AppendTo(nil))
}

// NextEvents waits for the next EVENTS frame of a Watch subscription and returns its events,
// which stay valid after the frame is released. The owner ending the subscription gives io.EOF
// (or the ERROR it sent); a lost link, rpc.ErrPeerGone. Either way, events may have been
// missed: watch again and rescan.
func NextEvents(ctx context.Context, sub *rpc.Subscription) ([]wire.Event, error) {
	buf, op, err := sub.Next(ctx)
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	return DecodeEvents(op, buf.Payload())
}

// DecodeEvents decodes one frame of a WATCH subscription, which must be EVENTS.
func DecodeEvents(op wire.Op, payload []byte) ([]wire.Event, error) {
	if op != wire.OpEvents {
		return nil, fmt.Errorf("%w: %v frame in a WATCH subscription", rpc.ErrProtocol, op)
	}
	var m wire.Events
	if err := m.Decode(payload); err != nil {
		return nil, fmt.Errorf("EVENTS: %w", err)
	}
	return m.List, nil
}
