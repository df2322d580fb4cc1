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

// TestRelayedLinkNeverDisplacesDirect: the peer whose link would win a simultaneous dial
// (the smaller device ID) reaches us through a relay while our direct link to it carries a
// pull: the direct link stays the one both use, and the pull finishes.
func TestRelayedLinkNeverDisplacesDirect(t *testing.T) {
	_, u := startRelay(t)
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	small, big := a, b
	if bytes.Compare(b.ID.ID[:], a.ID.ID[:]) < 0 {
		small, big = b, a
	}
	addRelay(small, u)
	addRelay(big, u)
	small.Trust(big, false)
	big.Trust(small, true) // big dials small directly
	src := t.TempDir()
	size := int64(256 << 20)
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 8)
	small.Share("data", src, true, big.Name)
	waitPath(t, big, small.Name, api.PathDirect, 10*time.Second)

	var once sync.Once
	dialBack := make(chan struct{})
	dialed := make(chan error, 1)
	go func() {
		<-dialBack
		dialed <- small.N.DialThroughRelay(context.Background(), big.Name)
	}()
	res, err := big.N.Pull(context.Background(), api.PullParams{Peer: small.Name, Share: "data", Path: "big.bin", Dest: t.TempDir()},
		func(e api.Event) {
			if e.Bytes > 0 {
				once.Do(func() { close(dialBack) })
			}
		})
	if err != nil {
		t.Fatalf("pull failed when the peer reached us through the relay: %v", err)
	}
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	if res.Bytes != size {
		t.Fatalf("pulled %d bytes, want %d", res.Bytes, size)
	}
	// The direct link stays, and is not closed as a drained one once idle (5 s).
	before := waitConnected(t, big, small.Name)
	time.Sleep(7 * time.Second)
	for _, n := range []*peertest.Node{big, small} {
		other := small.Name
		if n == small {
			other = big.Name
		}
		if st := waitConnected(t, n, other); st.Path != api.PathDirect {
			t.Errorf("%s reaches %s %s, want direct", n.Name, other, st.Path)
		}
	}
	if after := waitConnected(t, big, small.Name); !after.Since.Equal(before.Since) {
		t.Errorf("the direct link was replaced: connected since %v, was %v", after.Since, before.Since)
	}
}
