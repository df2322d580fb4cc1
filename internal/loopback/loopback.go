// Package loopback gives tests the two ends of a real TCP connection on 127.0.0.1, so that
// sessions, servers and transfers are tested over the kernel's sockets rather than a pipe. It
// imports nothing of peerfs, so any package's own tests can use it. Tests only.
package loopback

import (
	"net"
	"testing"
)

// Pair returns the dialling and the accepting end of a new loopback TCP connection, closed
// when the test ends.
func Pair(t testing.TB) (dialled, accepted net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	dialled, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted = <-acc
	if accepted == nil {
		dialled.Close()
		t.Fatal("loopback: accept failed")
	}
	t.Cleanup(func() {
		dialled.Close()
		accepted.Close()
	})
	return dialled, accepted
}
