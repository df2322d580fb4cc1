//go:build !unix && !windows

package punch

import (
	"errors"
	"syscall"
)

// reusePort: sharing a port between a listener and connects is not supported here.
func reusePort(network, address string, c syscall.RawConn) error {
	return errors.New("punch: sharing a port between sockets is not supported on this system")
}
