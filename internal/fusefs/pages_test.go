package fusefs

import (
	"math/rand/v2"
	"testing"
)

func TestSpansMergeAndCover(t *testing.T) {
	var sp spans
	sp.add(4, 8)
	sp.add(12, 16)
	sp.add(0, 2)
	if sp.covers(16) {
		t.Fatalf("covers with holes: %v", sp.s)
	}
	sp.add(2, 4)  // joins [0,2) and [4,8)
	sp.add(8, 12) // joins everything
	if len(sp.s) != 1 || !sp.covers(16) || sp.covers(17) {
		t.Fatalf("spans %v: want one [0,16)", sp.s)
	}
	sp.reset()
	if sp.covers(1) || !sp.covers(0) {
		t.Fatalf("reset spans %v", sp.s)
	}
}

// The set agrees with a byte map under random adds, the kernel's readahead order included.
func TestSpansRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var sp spans
		var have [256]bool
		for k := 0; k < 20; k++ {
			off := r.Int64N(256)
			end := min(off+r.Int64N(64), 256)
			sp.add(off, end)
			for i := off; i < end; i++ {
				have[i] = true
			}
			for i := 1; i < len(sp.s); i++ {
				if sp.s[i-1][1] >= sp.s[i][0] {
					t.Fatalf("unmerged or unsorted: %v", sp.s)
				}
			}
			var got [256]bool
			for _, s := range sp.s {
				for i := s[0]; i < s[1]; i++ {
					got[i] = true
				}
			}
			if got != have {
				t.Fatalf("after add(%d, %d): %v", off, end, sp.s)
			}
		}
	}
}
