//go:build linux

package share

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/watch"
	"github.com/peerfs/peerfs/internal/wire"
)

// nextMatching reads sub until a Changed event for path whose entry equals what Stat says now;
// earlier events for it may show intermediate states. It returns everything read.
func nextMatching(t *testing.T, s *Share, sub *watch.Sub, path string, seen []wire.Event) []wire.Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		want, err := s.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range seen {
			if ev.Kind == wire.EventChanged && ev.Path == path && reflect.DeepEqual(ev.Entry, want) {
				return seen
			}
		}
		select {
		case batch, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription ended waiting for %q", path)
			}
			seen = append(seen, batch...)
		case <-deadline:
			t.Fatalf("no event for %q with the entry Stat gives (%+v); saw %+v", path, want, seen)
		}
	}
}

func TestSubscribeEntriesMatchStat(t *testing.T) {
	fx := newFixture(t, false)
	sub, err := fx.s.Subscribe(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	var seen []wire.Event
	writeFile(t, filepath.Join(fx.shareDir, "sub", "new.txt"), "fresh", 0o600)
	seen = nextMatching(t, fx.s, sub, "sub/new.txt", seen)
	// The share's own changes, made for a peer, are reported too.
	if err := fx.s.Mkdir("made", 0o750, 0); err != nil {
		t.Fatal(err)
	}
	seen = nextMatching(t, fx.s, sub, "made", seen)
	if err := fx.s.Symlink("made/ln", "../a.txt", 0); err != nil {
		t.Fatal(err)
	}
	seen = nextMatching(t, fx.s, sub, "made/ln", seen)

	// Changes outside the share, even below a symlink that leads there, are never reported.
	writeFile(t, filepath.Join(fx.outside, "sub", "elsewhere"), "x", 0o644)
	writeFile(t, filepath.Join(fx.outside, "canary"), canaryContent, 0o640)
	writeFile(t, filepath.Join(fx.shareDir, "marker"), "", 0o644)
	seen = nextMatching(t, fx.s, sub, "marker", seen)
	for _, ev := range seen {
		if strings.HasPrefix(ev.Path, "out/") || strings.HasPrefix(ev.Path, "abs/") || strings.Contains(ev.Path, "elsewhere") {
			t.Fatalf("change outside the share reported as %q", ev.Path)
		}
	}

	fx.s.Close()
	for range sub.C() { // ends once the share is closed
	}
	if _, err := fx.s.Subscribe(nil); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}
