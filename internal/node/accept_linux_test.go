//go:build linux

package node_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/peertest"
)

// These tests count the process's open files in /proc and lower its RLIMIT_NOFILE.

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

// TestAcceptSurvivesFDExhaustion: a flood of idle connections while the open-file limit is
// nearly reached makes Accept fail with EMFILE; once the flood is gone, a trusted peer must
// still be able to connect.
func TestAcceptSurvivesFDExhaustion(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	a.Trust(b, false)

	fl := startFlood(t, "idle", "127.0.0.1", a.Addr, 300)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(openFDs(t) + 4) // fewer than one source's handshake cap
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower the open-file limit: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	fl.run(t)
	// The listener (punch.Listener) retries a failed Accept by itself, without a log line:
	// wait until the process is out of descriptors, which fails the daemon's Accept as it
	// fails this open.
	deadline := time.Now().Add(10 * time.Second)
	for {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
		if err == nil {
			syscall.Close(fd)
		} else if err == syscall.EMFILE {
			break
		}
		if time.Now().After(deadline) {
			restore()
			t.Fatal("the flood never used up the open-file limit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // Accept meets EMFILE meanwhile
	fl.stop()
	restore()

	b.Trust(a, true)
	waitConnected(t, b, "alpha")
	waitConnected(t, a, "beta")
}

// TestHandshakeFloodFromOneSource: hundreds of idle connections from one address hold at
// most that source's share of handshakes, and a trusted peer from another address connects
// meanwhile.
func TestHandshakeFloodFromOneSource(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	a.Trust(b, false)

	fl := startFlood(t, "idle", "127.0.0.2", a.Addr, 500)
	base := openFDs(t)
	fl.run(t)
	b.Trust(a, true)
	waitConnected(t, b, "alpha")
	peak := 0
	for range 20 {
		peak = max(peak, openFDs(t)-base)
		time.Sleep(50 * time.Millisecond)
	}
	// 8 handshakes from the flood's address, plus beta's link (its socket on both sides)
	// and what the runtime opened meanwhile.
	if peak > 8+16 {
		t.Fatalf("the flood holds %d more open files in the daemon; want at most one source's 8 handshakes (+16)", peak)
	}
}
