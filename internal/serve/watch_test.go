package serve

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

func TestSendEventsSplits(t *testing.T) {
	var batch []wire.Event
	for i := range 3000 {
		ev := wire.Event{Kind: wire.EventChanged, Path: fmt.Sprintf("%sfile-%05d", strings.Repeat("deep/", 40), i),
			Entry: wire.Entry{Mode: wire.ModeRegular | 0o644, Size: uint64(i), Ino: uint64(i), Nlink: 1}}
		switch i % 3 {
		case 1:
			ev = wire.Event{Kind: wire.EventRemoved, Path: ev.Path}
		case 2:
			ev.Entry.Mode, ev.Entry.Target = wire.ModeSymlink|0o777, "target"
		}
		batch = append(batch, ev)
	}
	var got []wire.Event
	frames := 0
	scratch, err := sendEvents(batch, nil, func(body []byte) error {
		frames++
		if len(body) > frameCut {
			t.Fatalf("EVENTS body of %d bytes, limit %d", len(body), frameCut)
		}
		var m wire.Events
		if err := m.Decode(body); err != nil {
			t.Fatal(err)
		}
		got = append(got, m.List...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if frames < 3 || !reflect.DeepEqual(got, batch) {
		t.Fatalf("%d frames carried %d of %d events, or changed them", frames, len(got), len(batch))
	}
	if _, err := sendEvents(nil, scratch, func([]byte) error { t.Fatal("empty batch sent"); return nil }); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("link gone")
	if _, err := sendEvents(batch, scratch, func([]byte) error { return stop }); err != stop {
		t.Fatalf("send error %v not returned", err)
	}
}
