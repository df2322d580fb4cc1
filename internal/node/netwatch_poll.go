package node

import (
	"context"
	"net"
	"slices"
	"time"
)

// pollNetwork compares the interface addresses every netPoll and sends on changes when they
// differ, until ctx ends.
func pollNetwork(ctx context.Context, changes chan<- struct{}) {
	last := interfaceAddrs()
	t := time.NewTicker(netPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := interfaceAddrs()
		if !slices.Equal(now, last) {
			last = now
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}
}

func interfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	slices.Sort(out)
	return out
}
