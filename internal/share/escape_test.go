package share

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/rootfs"
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
	{"Mkdir", func(s *Share, p string) error { return s.Mkdir(p, 0o777, 0) }},
	{"Symlink", func(s *Share, p string) error { return s.Symlink(p, "a.txt", 0) }},
	{"SetAttr", func(s *Share, p string) error {
		return setAttr(s, p, wire.SetMode|wire.SetMtime, 0o777, time.Now())
	}},
	// The mount's operations. A path in either place of a two-name operation is tried.
	{"SetAttrSize", func(s *Share, p string) error {
		_, err := s.SetAttr(wire.SetAttrReq{Path: p, Valid: wire.SetSize | wire.SetAtime, Size: 0, AtimeNs: 1})
		return err
	}},
	{"ReadDirInline", func(s *Share, p string) error { _, err := s.ReadDirInline(p, wire.MaxInline); return err }},
	{"Create", func(s *Share, p string) error { _, err := s.Create(p, 0o666, 0); return err }},
	{"CreateExcl", func(s *Share, p string) error { _, err := s.Create(p, 0o666, wire.CreateExclusive); return err }},
	{"CreateTrunc", func(s *Share, p string) error { _, err := s.Create(p, 0o666, wire.CreateTruncate); return err }},
	{"Write", func(s *Share, p string) error { _, err := s.Write(p, 0, []byte("overwritten?")); return err }},
	{"Unlink", func(s *Share, p string) error { return s.Unlink(p) }},
	{"Rmdir", func(s *Share, p string) error { return s.Rmdir(p) }},
	{"RenameFrom", func(s *Share, p string) error { return s.Rename(p, "renamed", 0) }},
	{"RenameTo", func(s *Share, p string) error { return s.Rename("a.txt", p, 0) }},
	{"RenameExchange", func(s *Share, p string) error { return s.Rename("a.txt", p, wire.RenameExchange) }},
	{"RenameNoReplace", func(s *Share, p string) error { return s.Rename(p, "renamed", wire.RenameNoReplace) }},
	{"LinkFrom", func(s *Share, p string) error { _, err := s.Link(p, "linked"); return err }},
	{"LinkTo", func(s *Share, p string) error { _, err := s.Link("a.txt", p); return err }},
	{"GetXattr", func(s *Share, p string) error { _, err := s.GetXattr(p, "user.test"); return err }},
	{"ListXattr", func(s *Share, p string) error { _, err := s.ListXattr(p); return err }},
	{"SetXattr", func(s *Share, p string) error { return s.SetXattr(p, "user.test", []byte("v"), 0) }},
	{"RemoveXattr", func(s *Share, p string) error { return s.RemoveXattr(p, "user.test") }},
	{"Fallocate", func(s *Share, p string) error { _, err := s.Fallocate(p, 0, 0, 4096); return err }},
	{"Fsync", func(s *Share, p string) error { return s.Fsync(p, false) }},
	{"Fdatasync", func(s *Share, p string) error { return s.Fsync(p, true) }},
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

func methodNamed(t *testing.T, name string) method {
	t.Helper()
	for _, m := range methods {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no method %s in the table", name)
	return method{}
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

		// The mount's operations. Names are acted on as names (removed, renamed, linked, their
		// own attributes); only opening a file follows a link, and that is refused outward.
		{"out", "SetAttrSize", wire.EINVAL}, // a link has no content
		{"out", "ReadDirInline", wire.ErrnoPathRefused},
		{"out", "Create", wire.ErrnoPathRefused},
		{"out", "CreateExcl", wire.EEXIST},
		{"out", "CreateTrunc", wire.ErrnoPathRefused},
		{"out", "Write", wire.ErrnoPathRefused},
		{"out", "Unlink", ok},
		{"out", "Rmdir", wire.ENOTDIR},
		{"out", "RenameFrom", ok},
		{"out", "RenameTo", ok}, // a.txt replaces the link
		{"out", "RenameExchange", ok},
		{"out", "RenameNoReplace", ok},
		{"out", "LinkFrom", ok}, // a second name for the link itself
		{"out", "LinkTo", wire.EEXIST},
		{"out", "GetXattr", wire.ENODATA},
		{"out", "ListXattr", ok},
		{"out", "SetXattr", wire.EPERM},
		{"out", "RemoveXattr", wire.EPERM},
		{"out", "Fallocate", wire.ErrnoPathRefused},
		{"out", "Fsync", wire.ErrnoPathRefused},
		{"out/canary", "Fdatasync", wire.ErrnoPathRefused},
		{"abs", "Unlink", ok},
		{"abs", "Rmdir", wire.ENOTDIR},
		{"abs", "Create", wire.ErrnoPathRefused},
		{"abs", "RenameExchange", ok},
		{"absfile", "Create", wire.ErrnoPathRefused},
		{"absfile", "CreateTrunc", wire.ErrnoPathRefused},
		{"absfile", "Write", wire.ErrnoPathRefused},
		{"absfile", "Fallocate", wire.ErrnoPathRefused},
		{"absfile", "Fsync", wire.ErrnoPathRefused},
		{"absfile", "SetAttrSize", wire.EINVAL},
		{"absfile", "GetXattr", wire.ENODATA},
		{"absfile", "SetXattr", wire.EPERM},
		{"absfile", "LinkFrom", ok},
		{"dangling", "Create", ok}, // creates "missing", inside, as open(O_CREAT) would
		{"dangling", "CreateExcl", wire.EEXIST},
		{"dangling", "Write", wire.ENOENT},
		{"dangling", "Unlink", ok},
		{"dangling/x", "Unlink", wire.ENOENT},
		{"dangling/x", "RenameTo", wire.ENOENT},
		{"loop", "Create", wire.ELOOP},
		{"loop", "Write", wire.ELOOP},
		{"loop", "Unlink", ok},
		{"loop/x", "Unlink", wire.ELOOP},
		{"loop/x", "Rmdir", wire.ELOOP},
		{"loop/x", "RenameFrom", wire.ELOOP},
		{"loop/x", "LinkTo", wire.ELOOP},
		{"loop/x", "GetXattr", wire.ELOOP},
		{"loop/x", "Fsync", wire.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.method+"/"+tt.path, func(t *testing.T) {
			fx := newFixture(t, false)
			before := snapshot(t, fx.outside)
			m := methodNamed(t, tt.method)
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
		if err := s.Symlink("evil", target, 0); err != nil {
			t.Fatalf("Symlink evil -> %s: %v", target, err)
		}
		for _, m := range methods {
			wantCode(t, m.name+"(evil/canary) via "+target, m.call(s, "evil/canary"), wire.ErrnoPathRefused)
		}
		wantCode(t, "OpenRead(evil)", methods[2].call(s, "evil"), wire.ErrnoPathRefused)
	}

	// A part name planted as a link to the canary: a fresh or resumed part replaces the link.
	for _, resume := range []bool{false, true} {
		if err := s.Symlink(".x.peerfs-part", "../outside/canary", 0); err != nil {
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
		if err := s.Symlink(".y.peerfs-part", target, 0); err != nil {
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

// TestEscapeErrorLearned guards the detection of os.Root's unexported escape error
// (rootfs.IsEscape): if a Go release changes how it is reported, this fails rather than
// refusals turning into EIO.
func TestEscapeErrorLearned(t *testing.T) {
	fx := newFixture(t, false)
	r, err := os.OpenRoot(fx.shareDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"../x", "/x", "out/canary", "abs", "sub/../../x"} {
		_, err := r.Stat(name)
		if !rootfs.IsEscape(err) || Errno(err) != wire.ErrnoPathRefused {
			t.Errorf("os.Root Stat(%q) = %v: not recognised as an escape", name, err)
		}
	}
	if err := r.Rename("a.txt", "out/a.txt"); Errno(err) != wire.ErrnoPathRefused {
		t.Errorf("os.Root Rename escape = %v (%v), want PATH_REFUSED", err, Errno(err))
	}
}
