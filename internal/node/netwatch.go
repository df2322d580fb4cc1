package node

import (
	"context"
	"time"
)

// Network changes.
//
// A laptop that moves to another network, or wakes from sleep, has links and relay joins
// that are dead without knowing it, and peers it may now reach another way. Waiting for the
// keepalive (30 s) and the next backoff step would leave mounts without their owner that
// long, so a change triggers new attempts at once: every peer's dial loop tries now (a
// peer on a relayed link tries its direct paths again) and every relay gets a fresh
// listening join. Changes come from the system (netwatch_linux.go: a netlink subscription
// to address, route and link changes) or, elsewhere, from comparing the interface
// addresses every netPoll (netwatch_other.go); a resume from sleep shows as the wall clock
// jumping ahead of the monotonic one between two ticks of the same poll.
const (
	// netPoll is how often addresses are compared where the system does not tell, and how
	// often a resume from sleep is looked for.
	netPoll = 5 * time.Second
	// netSettle gathers the burst of messages one change makes (an address goes, a route
	// goes, a new address comes) into one reaction.
	netSettle = 500 * time.Millisecond
)

// netwatchLoop calls networkChanged after each change of the network, until ctx ends.
func (n *Node) netwatchLoop(ctx context.Context) {
	changes := make(chan struct{}, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchNetwork(ctx, n.log, changes)
	}()
	defer func() { <-watched }()
	tick := time.NewTicker(netPoll)
	defer tick.Stop()
	last := time.Now()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			if settle == nil {
				settle = time.After(netSettle)
			}
		case <-settle:
			settle = nil
			n.networkChanged("network change")
		case now := <-tick.C:
			// time.Now carries a monotonic reading, which stops while the machine sleeps;
			// Round(0) strips it, leaving the wall clock, which does not.
			if wall := now.Round(0).Sub(last.Round(0)); wall > 3*netPoll {
				n.networkChanged("resumed after " + wall.Round(time.Second).String())
			}
			last = now
		}
	}
}

// networkChanged makes every peer and relay try again now.
func (n *Node) networkChanged(why string) {
	n.log.Info("reconnecting after a network change", "why", why)
	n.mu.Lock()
	for _, p := range n.peers {
		p.kickDial()
	}
	relays := append([]*relayClient(nil), n.relays...)
	n.mu.Unlock()
	for _, rc := range relays {
		rc.kick()
	}
}
