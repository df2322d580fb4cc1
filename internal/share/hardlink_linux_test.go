package share

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// TestHardlinkOutsideRefused: a hard link inside the share to a file outside it is refused
// for every read, write and attribute change (EACCES), with a message that says how to allow
// it, and the file outside is untouched; a share that allows hard links serves it.
func TestHardlinkOutsideRefused(t *testing.T) {
	fx := newFixture(t, false)
	canary := filepath.Join(fx.outside, "canary")
	if err := os.Link(canary, filepath.Join(fx.shareDir, "hl")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, fx.outside)
	s := fx.s
	refused := func(what string, err error) {
		t.Helper()
		wantCode(t, what, err, wire.EACCES)
		if !errors.Is(err, ErrHardlink) {
			t.Errorf("%s: %v, want the hard-link refusal", what, err)
		}
		if msg := Message(err); !strings.Contains(msg, "--allow-hardlinks") {
			t.Errorf("%s: message %q does not say how to allow it", what, msg)
		}
	}
	f, _, err := s.OpenRead("hl")
	if err == nil {
		f.Close()
	}
	refused("open for reading", err)
	_, err = s.Write("hl", 0, []byte("owned"))
	refused("write", err)
	_, err = s.CreateWith(wire.CreateReq{Path: "hl", Mode: 0o644, Flags: wire.CreateTruncate})
	refused("create with truncate", err)
	_, err = s.SetAttr(wire.SetAttrReq{Path: "hl", Valid: wire.SetMode | wire.SetMtime, Mode: 0o777, MtimeNs: time.Now().UnixNano()})
	refused("setattr", err)
	_, err = s.SetAttr(wire.SetAttrReq{Path: "hl", Valid: wire.SetSize})
	refused("truncate", err)
	_, err = s.GetXattr("hl", "user.x")
	refused("getxattr", err)
	_, err = s.Link("hl", "hl2")
	refused("link of it", err)
	sameSnapshot(t, "the file outside", before, snapshot(t, fx.outside))

	allowing, err := OpenWith("allowing", fx.shareDir, Options{AllowHardlinks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer allowing.Close()
	f, _, err = allowing.OpenRead("hl")
	if err != nil {
		t.Fatalf("a share that allows hard links refused one: %v", err)
	}
	b, _ := os.ReadFile(f.Name())
	f.Close()
	if string(b) != canaryContent {
		t.Errorf("read %q through a share that allows hard links", b)
	}
}

// TestHardlinkMadeThroughShare: a hard link made through the share (a mount's ln) is served
// under both names, also after the share is opened again; peers can neither see nor set the
// attribute that marks it.
func TestHardlinkMadeThroughShare(t *testing.T) {
	fx := newFixture(t, false)
	if _, err := fx.s.Link("a.txt", "sub/a2.txt"); err != nil {
		t.Fatal(err)
	}
	check := func(s *Share, what string) {
		t.Helper()
		for _, p := range []string{"a.txt", "sub/a2.txt"} {
			if _, err := s.Write(p, 5, []byte("!")); err != nil {
				t.Errorf("%s: write %s: %v", what, p, err)
			}
			f, _, err := s.OpenRead(p)
			if err != nil {
				t.Errorf("%s: open %s: %v", what, p, err)
				continue
			}
			f.Close()
		}
	}
	check(fx.s, "after the link")
	if !xattrsSupported(t, fx.shareDir) {
		return // the share remembers the link in memory only
	}
	again, err := Open("again", fx.shareDir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check(again, "after the share was opened again")
	names, err := again.ListXattr("a.txt")
	if err != nil || slices.Contains(names, linkMark) {
		t.Errorf("listxattr shows %v (%v): the link mark must stay hidden", names, err)
	}
	wantCode(t, "getxattr of the mark", func() error { _, err := again.GetXattr("a.txt", linkMark); return err }(), wire.ENODATA)
	wantCode(t, "setxattr of the mark", again.SetXattr("a.txt", linkMark, []byte("1"), 0), wire.EPERM)
	wantCode(t, "removexattr of the mark", again.RemoveXattr("a.txt", linkMark), wire.EPERM)
}
