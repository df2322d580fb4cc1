//go:build !linux

package node

import "net"

// setDeadPathTimeout does nothing here: a dead path is noticed by the link's keepalive.
func setDeadPathTimeout(net.Conn) {}
