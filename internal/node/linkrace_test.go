package node_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestLosingLinkFinishesItsPull: a pull runs on the link we dialled when the peer, whose
// device ID is smaller, dials us too; its link wins on both sides (the simultaneous-dial
// rule), and ours must drain rather than close under the pull, as happens when two daemons
// start together or hear each other on the LAN at once.
func TestLosingLinkFinishesItsPull(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	small, big := a, b
	if bytes.Compare(b.ID.ID[:], a.ID.ID[:]) < 0 {
		small, big = b, a
	}
	small.Trust(big, false) // only big dials; small dials once, below
	big.Trust(small, true)
	src := t.TempDir()
	size := int64(256 << 20)
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 7)
	small.Share("data", src, true, big.Name)
	first := waitConnected(t, big, small.Name)

	// At the pull's first progress, small dials big: its link replaces big's.
	var once sync.Once
	dialBack := make(chan struct{})
	dialed := make(chan error, 1)
	go func() {
		<-dialBack
		dialed <- small.N.DialAgain(context.Background(), big.Name, big.Addr)
	}()
	res, err := big.N.Pull(context.Background(), api.PullParams{Peer: small.Name, Share: "data", Path: "big.bin", Dest: t.TempDir()},
		func(e api.Event) {
			if e.Bytes > 0 {
				once.Do(func() { close(dialBack) })
			}
		})
	if err != nil {
		t.Fatalf("pull failed when the peer's link replaced ours: %v", err)
	}
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	if res.Bytes != size {
		t.Fatalf("pulled %d bytes, want %d", res.Bytes, size)
	}
	// The replacement did happen (else the test proved nothing): big's link is now the one
	// small opened.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := waitConnected(t, big, small.Name)
		if !st.Since.Equal(first.Since) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the link was never replaced: connected since %v still", st.Since)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
