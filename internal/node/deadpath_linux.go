package node

import (
	"net"

	"golang.org/x/sys/unix"
)

// setDeadPathTimeout sets TCP_USER_TIMEOUT on c if it is a TCP connection.
func setDeadPathTimeout(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(deadPathTimeout.Milliseconds()))
	})
}
