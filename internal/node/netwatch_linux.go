package node

import (
	"context"
	"log/slog"

	"golang.org/x/sys/unix"
)

// watchNetwork sends on changes (without blocking) whenever the kernel announces a change of
// a link, an address or a route (rtnetlink multicast groups), until ctx ends. If netlink is
// unavailable it falls back to polling the addresses.
func watchNetwork(ctx context.Context, log *slog.Logger, changes chan<- struct{}) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err == nil {
		groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR |
			unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
		if err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		log.Debug("no netlink subscription; polling the interface addresses", "err", err)
		pollNetwork(ctx, changes)
		return
	}
	defer unix.Close(fd)
	// Recvfrom wakes at least this often to see whether ctx ended.
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if ctx.Err() != nil {
			return
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil && err != unix.ENOBUFS { // ENOBUFS: messages were lost, so something changed
			log.Debug("netlink subscription ended; polling the interface addresses", "err", err)
			pollNetwork(ctx, changes)
			return
		}
		if n == 0 && err == nil {
			pollNetwork(ctx, changes)
			return
		}
		select {
		case changes <- struct{}{}:
		default:
		}
	}
}
