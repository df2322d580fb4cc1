package punch

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// reusePort lets a listening socket and connecting sockets share one port: on Windows
// SO_REUSEADDR alone allows it (there is no SO_REUSEPORT).
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = windows.SetsockoptInt(windows.Handle(fd), windows.SOL_SOCKET, windows.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
