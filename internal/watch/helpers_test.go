package watch

import (
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// waitLimit bounds every wait for an event; events normally arrive within one window.
const waitLimit = 5 * time.Second

func newHub(t *testing.T, dir string) *Hub {
	t.Helper()
	h, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// reader collects a subscriber's events and waits for particular ones.
type reader struct {
	t    *testing.T
	sub  *Sub
	seen []wire.Event
	pos  int // seen[:pos] were matched or skipped by earlier waits
}

func newReader(t *testing.T, h *Hub) *reader {
	return &reader{t: t, sub: h.Subscribe()}
}

// wait returns the first event from the current position on that is of kind at path, and
// moves past it.
func (r *reader) wait(kind uint8, path string) wire.Event {
	r.t.Helper()
	return r.waitFor(kind, path, func(wire.Entry) bool { return true })
}

// waitFor is wait for an event whose entry also satisfies ok: a change can be seen in several
// batches, the first ones showing an intermediate state.
func (r *reader) waitFor(kind uint8, path string, ok func(wire.Entry) bool) wire.Event {
	r.t.Helper()
	deadline := time.After(waitLimit)
	for {
		for i := r.pos; i < len(r.seen); i++ {
			if ev := r.seen[i]; ev.Kind == kind && ev.Path == path && ok(ev.Entry) {
				r.pos = i + 1
				return ev
			}
		}
		select {
		case batch, ok := <-r.sub.C():
			if !ok {
				r.t.Fatalf("subscription ended waiting for %s", show([]wire.Event{{Kind: kind, Path: path}})[0])
			}
			r.seen = append(r.seen, batch...)
		case <-deadline:
			r.t.Fatalf("no %s within %v; saw %q", show([]wire.Event{{Kind: kind, Path: path}})[0], waitLimit, show(r.seen[r.pos:]))
		}
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
