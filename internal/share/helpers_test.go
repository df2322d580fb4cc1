package share

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// oldTime is the mtime given to fixture files, far from "now" so any touch shows.
var oldTime = time.Date(2001, 2, 3, 4, 5, 6, 789000000, time.UTC)

const canaryContent = "canary: must never be read or changed through a share\n"

// fixture is a temporary tree:
//
//	base/outside/canary        known content, mode 0640, old mtime
//	base/outside/sub/inner
//	base/share/a.txt           "hello", 0640
//	base/share/sub/b.txt       "bee"
//	base/share/sub/up       -> ../a.txt      (inside, via ..)
//	base/share/link         -> a.txt         (inside)
//	base/share/out          -> ../outside    (leads outside)
//	base/share/abs          -> /abs/outside  (leads outside)
//	base/share/absfile      -> /abs/outside/canary
//	base/share/dangling     -> missing
//	base/share/loop         -> loop
type fixture struct {
	base, shareDir, outside string
	s                       *Share
}

func newFixture(t testing.TB, readOnly bool) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{
		base:     base,
		shareDir: filepath.Join(base, "share"),
		outside:  filepath.Join(base, "outside"),
	}
	mkdirs(t, fx.outside, filepath.Join(fx.outside, "sub"), fx.shareDir, filepath.Join(fx.shareDir, "sub"))
	writeFile(t, filepath.Join(fx.outside, "canary"), canaryContent, 0o640)
	writeFile(t, filepath.Join(fx.outside, "sub", "inner"), "inner", 0o600)
	writeFile(t, filepath.Join(fx.shareDir, "a.txt"), "hello", 0o640)
	writeFile(t, filepath.Join(fx.shareDir, "sub", "b.txt"), "bee", 0o644)
	links := map[string]string{
		"sub/up":   "../a.txt",
		"link":     "a.txt",
		"out":      "../outside",
		"abs":      fx.outside,
		"absfile":  filepath.Join(fx.outside, "canary"),
		"dangling": "missing",
		"loop":     "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(fx.shareDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Directory mtimes last, after their contents were made.
	for _, p := range []string{filepath.Join(fx.outside, "sub"), fx.outside} {
		if err := os.Chtimes(p, oldTime, oldTime); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open("test", fx.shareDir, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fx.s = s
	return fx
}

func mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t testing.TB, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, oldTime, oldTime); err != nil {
		t.Fatal(err)
	}
}

// fileState is what a snapshot records of one name: anything a peer could change.
type fileState struct {
	Mode   fs.FileMode
	Size   int64
	Mtime  int64
	Ctime  int64
	Data   string
	Target string
}

// snapshot records every name under dir (dir itself as "."), without following links.
func snapshot(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fileState{Mode: fi.Mode(), Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
		if raw, ok := rawEntry(fi); ok {
			st.Ctime = raw.CtimeNs
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.Data = string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			if st.Target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameSnapshot(t testing.TB, what string, before, after map[string]fileState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		for k, v := range after {
			if w, ok := before[k]; !ok || w != v {
				t.Errorf("%s: %q changed: before %+v, after %+v", what, k, w, v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s: %q disappeared", what, k)
			}
		}
	}
}

// wantCode fails unless Errno(err) is want (0 meaning success).
func wantCode(t testing.TB, what string, err error, want wire.Errno) {
	t.Helper()
	if got := Errno(err); got != want {
		t.Errorf("%s: Errno = %v, want %v (err: %v)", what, got, want, err)
	}
	if want == wire.ErrnoPathRefused && !errors.Is(err, ErrPathRefused) {
		t.Errorf("%s: error does not match ErrPathRefused: %v", what, err)
	}
	if err != nil {
		checkMessage(t, what, err)
	}
}

// checkMessage fails if the peer-facing text is not one short line free of the owner's
// absolute paths.
func checkMessage(t testing.TB, what string, err error) {
	t.Helper()
	msg := Message(err)
	switch {
	case msg == "":
		t.Errorf("%s: empty Message for %v", what, err)
	case len(msg) > wire.MaxMessageLen:
		t.Errorf("%s: Message is %d bytes", what, len(msg))
	case strings.ContainsAny(msg, "\n\r"):
		t.Errorf("%s: Message has a line break: %q", what, msg)
	case strings.Contains(msg, os.TempDir()):
		t.Errorf("%s: Message reveals an absolute path: %q", what, msg)
	}
}

// setAttr calls SetAttr with the fields a direct transfer sets and keeps only the error.
func setAttr(s *Share, path string, valid, mode uint32, mtime time.Time) error {
	_, err := s.SetAttr(wire.SetAttrReq{Path: path, Valid: valid, Mode: mode, MtimeNs: mtime.UnixNano()})
	return err
}

// setAttrEntry is Share.SetAttr's Entry after the change.
func setAttrEntry(s *Share, req wire.SetAttrReq) (wire.Entry, error) {
	resp, err := s.SetAttr(req)
	return resp.Entry, err
}
