package share

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// method is one Share method called with a path, reduced to its error.
type method struct {
	name string
	call func(s *Share, path string) error
}

var methods = []method{
	{"Stat", func(s *Share, p string) error { _, err := s.Stat(p); return err }},
	{"ReadDir", func(s *Share, p string) error { _, err := s.ReadDir(p); return err }},
	{"OpenRead", func(s *Share, p string) error {
		f, _, err := s.OpenRead(p)
		if f != nil {
			f.Close()
		}
		return err
	}},
	{"CreatePart", func(s *Share, p string) error {
		f, _, err := s.CreatePart(p, false)
		if f != nil {
			f.Close()
		}
		return err
	}},
	{"CreatePartResume", func(s *Share, p string) error {
		f, _, err := s.CreatePart(p, true)
		if f != nil {
			f.Close()
		}
		return err
	}},
	{"CommitPart", func(s *Share, p string) error { return s.CommitPart(p, 0o777, time.Now()) }},
	{"RemovePart", func(s *Share, p string) error { return s.RemovePart(p) }},
	{"Mkdir", func(s *Share, p string) error { return s.Mkdir(p, 0o777) }},
	{"Symlink", func(s *Share, p string) error { return s.Symlink(p, "a.txt") }},
	{"SetAttr", func(s *Share, p string) error {
		return s.SetAttr(p, wire.SetMode|wire.SetMtime, 0o777, time.Now())
	}},
}

// refusedVectors are paths every method must refuse with ErrnoPathRefused: invalid on the wire,
// or valid but leading outside through a symlink.
func refusedVectors() []string {
	return []string{
		"../outside/canary",
		"..",
		"/etc/passwd",
		"/",
		"a/../../outside/canary",
		"sub/../../outside/canary",
		"out/canary",
		"out/sub/inner",
		"out/new",
		"out/sub",
		"abs/canary",
		"abs/new",
		"abs/sub/new",
		"x\x00y",
		"out/\x00",
		strings.Repeat("n", wire.MaxNameLen+1),
		strings.Repeat("d/", wire.MaxPathLen/2) + "x", // 4097 bytes
		"./a",
		"./a.txt",
		".",
		"a//b",
		"a/",
		"a.txt/",
		"sub/",
	}
}

func TestEscapeVectorsRefused(t *testing.T) {
	fx := newFixture(t, false)
	outsideBefore := snapshot(t, fx.outside)
	shareBefore := snapshot(t, fx.shareDir)
	for _, v := range refusedVectors() {
		for _, m := range methods {
			err := m.call(fx.s, v)
			wantCode(t, m.name+"("+quoteShort(v)+")", err, wire.ErrnoPathRefused)
		}
	}
	sameSnapshot(t, "outside", outsideBefore, snapshot(t, fx.outside))
	sameSnapshot(t, "share", shareBefore, snapshot(t, fx.shareDir))
}

func quoteShort(s string) string {
	if len(s) > 40 {
		return strings.TrimSuffix(quote(s[:40]), `"`) + `..."`
	}
	return quote(s)
}

func quote(s string) string { return strings.ReplaceAll(`"`+s+`"`, "\x00", `\x00`) }

// TestLinksLeadingOutside covers names that are themselves symlinks leading outside (or
// dangling, or looping). Each is legal to describe, replace or remove as a name in the share,
// never to follow; every case is checked on a fresh tree, then outside/ is compared.
func TestLinksLeadingOutside(t *testing.T) {
	const ok = wire.Errno(0)
	tests := []struct {
		path   string
		method string
		want   wire.Errno
	}{
		{"out", "Stat", ok},
		{"out", "ReadDir", wire.ErrnoPathRefused},
		{"out", "OpenRead", wire.ErrnoPathRefused},
		{"out", "Mkdir", wire.EEXIST},
		{"out", "SetAttr", ok}, // on the link itself
		{"out", "Symlink", ok}, // replaces the link, inside the share
		{"out", "CreatePart", ok},
		{"out", "RemovePart", ok},
		{"out", "CommitPart", wire.ENOENT}, // no part uploaded
		{"abs", "Stat", ok},
		{"abs", "ReadDir", wire.ErrnoPathRefused},
		{"abs", "OpenRead", wire.ErrnoPathRefused},
		{"abs", "Mkdir", wire.EEXIST},
		{"abs", "SetAttr", ok},
		{"absfile", "OpenRead", wire.ErrnoPathRefused},
		{"absfile", "ReadDir", wire.ErrnoPathRefused},
		{"absfile", "SetAttr", ok},
		// os.Root reports a dangling link as missing and a loop as ELOOP.
		{"dangling", "Stat", ok},
		{"dangling", "OpenRead", wire.ENOENT},
		{"dangling", "ReadDir", wire.ENOENT},
		{"dangling/x", "Mkdir", wire.ENOENT},
		{"loop", "OpenRead", wire.ELOOP},
		{"loop/x", "Stat", wire.ELOOP},
		{"loop/x", "CreatePart", wire.ELOOP},
		{"loop/x", "Mkdir", wire.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.method+"/"+tt.path, func(t *testing.T) {
			fx := newFixture(t, false)
			before := snapshot(t, fx.outside)
			var m method
			for _, c := range methods {
				if c.name == tt.method {
					m = c
				}
			}
			wantCode(t, tt.method, m.call(fx.s, tt.path), tt.want)
			sameSnapshot(t, "outside", before, snapshot(t, fx.outside))
		})
	}
}

// TestPeerMadeLinks: a peer may create any symlink, but following it stays confined, and a link
// planted under an upload's part name never redirects the upload.
func TestPeerMadeLinks(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	before := snapshot(t, fx.outside)

	for _, target := range []string{"../outside", fx.outside, "sub/../../outside"} {
		if err := s.Symlink("evil", target); err != nil {
			t.Fatalf("Symlink evil -> %s: %v", target, err)
		}
		for _, m := range methods {
			wantCode(t, m.name+"(evil/canary) via "+target, m.call(s, "evil/canary"), wire.ErrnoPathRefused)
		}
		wantCode(t, "OpenRead(evil)", methods[2].call(s, "evil"), wire.ErrnoPathRefused)
	}

	// A part name planted as a link to the canary: a fresh or resumed part replaces the link.
	for _, resume := range []bool{false, true} {
		if err := s.Symlink(".x.peerfs-part", "../outside/canary"); err != nil {
			t.Fatal(err)
		}
		f, off, err := s.CreatePart("x", resume)
		if err != nil {
			t.Fatalf("CreatePart(x, %v) over a planted link: %v", resume, err)
		}
		if off != 0 {
			t.Errorf("CreatePart(x, %v) offset = %d, want 0", resume, off)
		}
		f.WriteString("overwrite?")
		f.Close()
		if fi, err := os.Lstat(filepath.Join(fx.shareDir, ".x.peerfs-part")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("part after CreatePart(resume=%v) is not a regular file: %v %v", resume, fi, err)
		}
		if err := s.RemovePart("x"); err != nil {
			t.Fatal(err)
		}
	}

	// A planted link as the part at commit time is refused, wherever it points.
	for _, target := range []string{"../outside/canary", "a.txt"} {
		if err := s.Symlink(".y.peerfs-part", target); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "CommitPart(y) with part -> "+target, s.CommitPart("y", 0o777, time.Now()), wire.EINVAL)
		if err := s.RemovePart("y"); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(fx.shareDir, "a.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a.txt changed through a planted part link: %v %v", fi, err)
	}
	sameSnapshot(t, "outside", before, snapshot(t, fx.outside))
}

// TestEscapeErrorLearned guards the detection of os.Root's unexported escape error: if a Go
// release changes how it is reported, this fails rather than refusals turning into EIO.
func TestEscapeErrorLearned(t *testing.T) {
	fx := newFixture(t, false)
	p := escapeErr.Load()
	if p == nil {
		t.Fatal("Open did not learn os.Root's escape error")
	}
	if got := (*p).Error(); got != escapeText {
		t.Errorf("learned escape error %q, want %q", got, escapeText)
	}
	r, err := os.OpenRoot(fx.shareDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"../x", "/x", "out/canary", "abs", "sub/../../x"} {
		_, err := r.Stat(name)
		if !isEscape(err) || Errno(err) != wire.ErrnoPathRefused {
			t.Errorf("os.Root Stat(%q) = %v: not recognised as an escape", name, err)
		}
	}
	if err := r.Rename("a.txt", "out/a.txt"); Errno(err) != wire.ErrnoPathRefused {
		t.Errorf("os.Root Rename escape = %v (%v), want PATH_REFUSED", err, Errno(err))
	}
}
