// Package sharetest is the owner side's test kit: a folder to share beside a canary folder
// that must stay untouched, snapshots to prove it did, and a request handler served over a
// real loopback TCP connection under TLS, as a peer reaches it. It imports neither share nor serve, so
// the tests of both, and of transfer, use it. Tests only.
package sharetest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
	"github.com/peerfs/peerfs/internal/watch"
)

// OldTime is the mtime given to fixture files, far from "now" so any touch shows.
var OldTime = time.Date(2001, 2, 3, 4, 5, 6, 789000000, time.UTC)

// CanaryContent is the content of the file outside the share that nothing may read or change.
const CanaryContent = "canary: must never be read or changed through a share\n"

// Tree is a temporary tree:
//
//	Base/outside/canary        CanaryContent, mode 0640, old mtime
//	Base/outside/sub/inner
//	Base/share/a.txt           "hello", 0640
//	Base/share/sub/b.txt       "bee"
//	Base/share/sub/up       -> ../a.txt      (inside, via ..)
//	Base/share/link         -> a.txt         (inside)
//	Base/share/out          -> ../outside    (leads outside)
//	Base/share/abs          -> /abs/outside  (leads outside)
//	Base/share/absfile      -> /abs/outside/canary
//	Base/share/dangling     -> missing
//	Base/share/loop         -> loop
type Tree struct {
	Base, Share, Outside string
}

// NewTree makes a Tree in a temporary directory of the test.
func NewTree(t testing.TB) Tree {
	t.Helper()
	base := t.TempDir()
	tr := Tree{Base: base, Share: filepath.Join(base, "share"), Outside: filepath.Join(base, "outside")}
	Mkdirs(t, tr.Outside, filepath.Join(tr.Outside, "sub"), tr.Share, filepath.Join(tr.Share, "sub"))
	WriteFile(t, filepath.Join(tr.Outside, "canary"), CanaryContent, 0o640)
	WriteFile(t, filepath.Join(tr.Outside, "sub", "inner"), "inner", 0o600)
	WriteFile(t, filepath.Join(tr.Share, "a.txt"), "hello", 0o640)
	WriteFile(t, filepath.Join(tr.Share, "sub", "b.txt"), "bee", 0o644)
	links := map[string]string{
		"sub/up":   "../a.txt",
		"link":     "a.txt",
		"out":      "../outside",
		"abs":      tr.Outside,
		"absfile":  filepath.Join(tr.Outside, "canary"),
		"dangling": "missing",
		"loop":     "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tr.Share, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Directory mtimes last, after their contents were made.
	for _, p := range []string{filepath.Join(tr.Outside, "sub"), tr.Outside} {
		if err := os.Chtimes(p, OldTime, OldTime); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// Mkdirs makes each directory (0755); its parent must exist.
func Mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteFile writes content to path with exactly the mode given and OldTime as its times.
func WriteFile(t testing.TB, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, OldTime, OldTime); err != nil {
		t.Fatal(err)
	}
}

// FileState is what a snapshot records of one name: anything a peer could change.
type FileState struct {
	Mode   fs.FileMode
	Size   int64
	Mtime  int64
	Ctime  int64 // 0 where the system's stat does not say
	Data   string
	Target string
}

// Snapshot records every name under dir (dir itself as "."), without following links.
func Snapshot(t testing.TB, dir string) map[string]FileState {
	t.Helper()
	m := map[string]FileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := FileState{Mode: fi.Mode(), Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Ctime: watch.EntryOf(fi).CtimeNs}
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

// SameSnapshot fails the test for every name that changed, appeared or disappeared between
// two snapshots.
func SameSnapshot(t testing.TB, what string, before, after map[string]FileState) {
	t.Helper()
	if reflect.DeepEqual(before, after) {
		return
	}
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

// Serve answers requests with h (the owner's handler) on one end of a real loopback TCP
// connection, under TLS 1.3 between two new identities as between two devices, and returns
// the other end's client, as a peer sees the owner. Both sessions close when the test ends.
func Serve(t testing.TB, h rpc.Handler) remote.Peer {
	t.Helper()
	ca, cb := loopback.Pair(t)
	peerID, ownerID := newIdentity(t), newIdentity(t)
	trust := func(ids ...identity.DeviceID) func() []identity.DeviceID {
		return func() []identity.DeviceID { return ids }
	}
	ctx := context.Background()
	var sb *rpc.Session
	var errb error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tc, err := transport.Server(ctx, cb, &transport.Config{Identity: ownerID, Trusted: trust(peerID.ID)})
		if err != nil {
			errb = err
			return
		}
		sb, errb = rpc.New(tc, rpc.Options{Name: "owner", Handler: h})
	}()
	tc, err := transport.Client(ctx, ca, &transport.Config{Identity: peerID, Trusted: trust(ownerID.ID)}, ownerID.ID)
	var sa *rpc.Session
	if err == nil {
		sa, err = rpc.New(tc, rpc.Options{Name: "peer"})
	}
	<-done
	if err != nil || errb != nil {
		t.Fatalf("link: %v / %v", err, errb)
	}
	t.Cleanup(func() { sa.Close(nil); sb.Close(nil) })
	return remote.Peer{S: sa}
}

func newIdentity(t testing.TB) *identity.Identity {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
