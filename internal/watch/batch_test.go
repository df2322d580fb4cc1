package watch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// changed looks every path up as changed, with no entry: batch tests check paths and kinds.
func changed(path string) (wire.Event, bool) {
	return wire.Event{Kind: wire.EventChanged, Path: path}, true
}

func TestBatch(t *testing.T) {
	many := func(dir string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, wire.Join(dir, fmt.Sprintf("f%d", i)))
		}
		return out
	}
	cases := []struct {
		name  string
		notes []string
		want  []string // "C path" or "R path"
	}{
		{"once each, first occurrence order", []string{"b", "a", "b", "d/x", "a", ""},
			[]string{"C b", "C a", "C d/x", "C "}},
		{"at the directory limit children stay", many("d", 4),
			[]string{"C d/f0", "C d/f1", "C d/f2", "C d/f3"}},
		{"past it one rescan where the first child was", append([]string{"x", "d"}, many("d", 5)...),
			[]string{"C x", "C d", "R d"}},
		{"rescan absorbs deeper paths, before and after", append([]string{"d/s/deep", "y"}, append(many("d", 5), "d/s/t/u", "z")...),
			[]string{"R d", "C y", "C z"}},
		{"nested rescans fold into the outer one", append(append(many("d/s", 5), many("d", 5)...), "q"),
			[]string{"R d", "C q"}},
		{"root's children past the limit rescan the root", append([]string{"d/x"}, many("", 5)...),
			[]string{"R "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b batch
			b.init(4, 64)
			for _, p := range c.notes {
				b.note(p)
			}
			if got := show(b.take(changed)); !slices.Equal(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if !b.empty() || len(b.take(changed)) != 0 {
				t.Fatal("take did not start a new batch")
			}
		})
	}

	t.Run("max paths", func(t *testing.T) {
		var b batch
		b.init(1000, 64)
		for i := range 20 {
			for _, p := range many(fmt.Sprintf("d%d", i), 4) {
				b.note(p)
			}
		}
		if got := show(b.take(changed)); !slices.Equal(got, []string{"R "}) {
			t.Fatalf("got %q, want one rescan of the root", got)
		}
	})
}

func show(events []wire.Event) []string {
	var out []string
	for _, ev := range events {
		k := map[uint8]string{wire.EventChanged: "C", wire.EventRemoved: "D", wire.EventRescan: "R"}[ev.Kind]
		out = append(out, k+" "+ev.Path)
	}
	return out
}
