package share

import (
	"reflect"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// FuzzSharePath drives Stat, OpenRead, CreatePart+RemovePart, Mkdir, the mount's writes
// (Create, Write, Fallocate, SetXattr, Link, Unlink) and Symlink with arbitrary paths on a
// writable share whose sibling outside/ holds a canary. It fails if outside/ changes in any
// way, or if a call succeeds on a path wire.CheckPath rejects. The Symlink call plants links
// that lead outside, so later inputs can try to travel through them.
func FuzzSharePath(f *testing.F) {
	for _, v := range refusedVectors() {
		f.Add(v)
	}
	for _, v := range []string{"", "a.txt", "sub", "sub/b.txt", "link", "out", "abs", "absfile",
		"dangling", "loop", "loop/x", "sub/up", "new", "new/x", "evil", "evil/canary", ".a.txt.peerfs-part"} {
		f.Add(v)
	}
	fx := newFixture(f, false)
	s := fx.s
	before := snapshot(f, fx.outside)

	f.Fuzz(func(t *testing.T, p string) {
		valid := wire.CheckPath(p) == nil
		calls := []struct {
			name string
			call func() error
		}{
			{"Stat", func() error { _, err := s.Stat(p); return err }},
			{"OpenRead", func() error {
				fh, _, err := s.OpenRead(p)
				if fh != nil {
					fh.Close()
				}
				return err
			}},
			{"CreatePart", func() error {
				fh, _, err := s.CreatePart(p, false)
				if err != nil {
					return err
				}
				fh.Close()
				if err := s.RemovePart(p); err != nil {
					t.Errorf("RemovePart(%q) after CreatePart: %v", p, err)
				}
				return nil
			}},
			{"Mkdir", func() error { return s.Mkdir(p, 0o755, 0) }},
			{"Create", func() error { _, err := s.Create(p, 0o644, wire.CreateTruncate); return err }},
			{"Write", func() error { _, err := s.Write(p, 3, []byte("fuzz")); return err }},
			{"Fallocate", func() error { _, err := s.Fallocate(p, 0, 0, 16); return err }},
			{"SetXattr", func() error { return s.SetXattr(p, "user.fuzz", []byte("v"), 0) }},
			{"Link", func() error { _, err := s.Link("sub/b.txt", p); return err }},
			{"Unlink", func() error { return s.Unlink(p) }},
			{"Symlink", func() error { return s.Symlink(p, "../outside", 0) }},
		}
		for _, c := range calls {
			err := c.call()
			if valid {
				continue
			}
			if err == nil {
				t.Fatalf("%s(%q) succeeded on a path CheckPath rejects", c.name, p)
			}
			if Errno(err) != wire.ErrnoPathRefused {
				t.Fatalf("%s(%q) = %v (%v), want PATH_REFUSED", c.name, p, Errno(err), err)
			}
		}
		if after := snapshot(t, fx.outside); !reflect.DeepEqual(before, after) {
			sameSnapshot(t, "outside", before, after)
			t.Fatalf("outside/ changed after path %q", p)
		}
	})
}
