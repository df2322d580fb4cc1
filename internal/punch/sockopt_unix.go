//go:build unix

package punch

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePort lets a listening socket and connecting sockets share one port: SO_REUSEADDR, and
// SO_REUSEPORT, without which Linux refuses to bind a second socket to a port a listener
// holds.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
