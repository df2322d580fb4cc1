package discover

import (
	"runtime"
	"testing"
	"time"
)

// TestCloseLeavesNoGoroutines: Close ends everything Start began, the mDNS library's loops
// included.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	lo := loopback(t)
	before := runtime.NumGoroutine()
	s, err := Start(Options{Self: testID(1), Port: 7701, Interfaces: []string{lo}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPeers([]Peer{{ID: testID(2)}})
	time.Sleep(300 * time.Millisecond)
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
