//go:build unix

package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/wire"
)

// TestWatchAcrossLink: a change on the owner's disk reaches a subscribed peer within a second,
// with the entry the owner's filesystem gives; a share not exported to the peer cannot be watched.
func TestWatchAcrossLink(t *testing.T) {
	a, b := peertest.Pair(t)
	dir := t.TempDir()
	a.Share("docs", dir, true, "beta")
	a.Share("secret", t.TempDir(), false)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := b.N.Session(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	p := remote.Peer{S: sess}
	var re *wire.RemoteError
	if _, err := p.Watch(ctx, "secret"); !errors.As(err, &re) || re.Code != wire.ErrnoNoShare {
		t.Fatalf("watching a share not exported to the peer: %v", err)
	}
	sub, err := p.Watch(ctx, "docs")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// next waits at most a second from now for an event of kind at path that satisfies ok,
	// skipping the events before it; those after it wait for the next call.
	var pending []wire.Event
	next := func(kind uint8, path string, ok func(wire.Entry) bool) wire.Event {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		for {
			for i, ev := range pending {
				if ev.Kind == kind && ev.Path == path && ok(ev.Entry) {
					pending = pending[i+1:]
					return ev
				}
			}
			pending = pending[:0]
			events, err := remote.NextEvents(wctx, sub)
			if err != nil {
				t.Fatalf("waiting for %q: %v", path, err)
			}
			pending = append(pending, events...)
		}
	}

	content := []byte("written on the owner's disk")
	name := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(name, content, 0o640); err != nil {
		t.Fatal(err)
	}
	ev := next(wire.EventChanged, "notes.txt", func(e wire.Entry) bool { return e.Size == uint64(len(content)) })
	fi, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	e := ev.Entry
	if e.Mode != wire.ModeRegular|0o640 || e.MtimeNs != fi.ModTime().UnixNano() || e.Ino != st.Ino ||
		e.Nlink != uint32(st.Nlink) || e.UID != st.Uid || e.GID != st.Gid || e.Target != "" {
		t.Fatalf("entry %+v does not match the owner's file %+v", e, *st)
	}

	if err := os.Rename(name, filepath.Join(dir, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	anyEntry := func(wire.Entry) bool { return true }
	next(wire.EventRemoved, "notes.txt", anyEntry)
	next(wire.EventChanged, "renamed.txt", func(e wire.Entry) bool { return e.Ino == st.Ino })

	// The peer's own CANCEL ends the subscription on the owner; a new one works alike.
	sub.Close()
	pending = nil
	if sub, err = p.Watch(ctx, "docs"); err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := os.Remove(filepath.Join(dir, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	next(wire.EventRemoved, "renamed.txt", anyEntry)

	// Once the share is no longer exported to the peer, its next change ends the subscription.
	a.Update(func(f *config.File) error {
		for i := range f.Shares {
			if f.Shares[i].Name == "docs" {
				f.Shares[i].Peers = nil
			}
		}
		return nil
	})
	if err := os.WriteFile(filepath.Join(dir, "private.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	for {
		events, err := remote.NextEvents(wctx, sub)
		if err != nil {
			if !errors.As(err, &re) || re.Code != wire.ErrnoNoShare {
				t.Fatalf("subscription after the share was withdrawn: %v", err)
			}
			break
		}
		for _, ev := range events {
			if ev.Path == "private.txt" {
				t.Fatal("change sent after the share was withdrawn from the peer")
			}
		}
	}
}
