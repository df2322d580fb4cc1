//go:build !linux

package node

import (
	"context"
	"log/slog"
)

// watchNetwork polls the interface addresses: other systems' change notifications (route
// sockets, NotifyAddrChange) are not used yet.
func watchNetwork(ctx context.Context, _ *slog.Logger, changes chan<- struct{}) {
	pollNetwork(ctx, changes)
}
