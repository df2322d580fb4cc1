package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/remote"
)

// BenchmarkRoundTrip times single requests between two real nodes over a real TLS link on
// loopback, without FUSE: the floor under every operation a mount sends to the owner.
//
//	go test -run '^$' -bench RoundTrip ./internal/node/
func BenchmarkRoundTrip(b *testing.B) {
	a, be := peertest.Pair(b)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	a.Share("m", dir, false, "beta")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := be.N.Session(ctx, "alpha")
	if err != nil {
		b.Fatal(err)
	}
	p := remote.Peer{S: sess}

	// STAT of one file: the lightest request, an fstatat on the owner.
	b.Run("stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Stat(ctx, "m", "x"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// CREATE then UNLINK of a new name: two requests that change the owner's disk (and
	// wake its watcher) per iteration.
	b.Run("create+unlink", func(b *testing.B) {
		i := 0
		for b.Loop() {
			name := fmt.Sprint("f", i)
			i++
			if _, err := p.Create(ctx, "m", name, 0o644, 0); err != nil {
				b.Fatal(err)
			}
			if err := p.Unlink(ctx, "m", name); err != nil {
				b.Fatal(err)
			}
		}
	})
}
