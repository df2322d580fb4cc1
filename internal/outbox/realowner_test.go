package outbox_test

// The journal against the real owner: serve.Handler with its JournalStore, over TLS on
// loopback, applying to files on disk.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/outbox"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/serve"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

const shareName = "docs"

// owner is a real owner of one share: its folder, its journal records, and links to it.
type owner struct {
	t        *testing.T
	dir      string
	journals string
	sh       *share.Share
}

func newOwner(t *testing.T) *owner {
	dir := t.TempDir()
	sh, err := share.Open(shareName, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &owner{t: t, dir: dir, journals: t.TempDir(), sh: sh}
}

// link serves the share with a JournalStore opened afresh on the owner's record directory
// (a new link to a restarted owner, as far as the journal can tell).
func (o *owner) link() *rpc.Session {
	store, err := serve.NewJournalStore(o.journals, nil)
	if err != nil {
		o.t.Fatal(err)
	}
	h := &serve.Handler{
		Lookup:   func(name string) (*share.Share, bool) { return o.sh, name == shareName },
		List:     func() []wire.ShareInfo { return []wire.ShareInfo{{Name: shareName}} },
		Journals: store,
	}
	return sharetest.Serve(o.t, h).S
}

// linker hands out the current link; swap replaces it (the mount reconnected).
type linker struct {
	mu   sync.Mutex
	sess *rpc.Session
}

func (l *linker) Link(ctx context.Context, _ remote.Patience) (*rpc.Session, context.Context, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess, ctx, func() {}, nil
}

func (l *linker) swap(s *rpc.Session) {
	l.mu.Lock()
	l.sess = s
	l.mu.Unlock()
}

// results records what OnResult delivers.
type results struct {
	mu  sync.Mutex
	got map[uint64]wire.ApplyResult
}

func (r *results) on(seq uint64, _ wire.ApplyOp, res wire.ApplyResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.got[seq]; dup {
		panic(fmt.Sprintf("result of op %d delivered twice", seq))
	}
	r.got[seq] = res
}

func (r *results) of(seq uint64) wire.ApplyResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[seq]
}

// mount is a mount's journal sending to the owner through l.
type mount struct {
	ob     *outbox.Outbox
	res    *results
	cancel context.CancelFunc
	done   chan error
}

func openMount(t *testing.T, dir string, l *linker) *mount {
	res := &results{got: map[uint64]wire.ApplyResult{}}
	ob, err := outbox.Open(outbox.Options{Dir: dir, OnResult: res.on, SyncAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &mount{ob: ob, res: res, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- ob.Run(ctx, remote.NewShare(l, shareName)) }()
	return m
}

// stop ends Run without closing the journal: what a kill of the mount's daemon leaves.
func (m *mount) stop() {
	m.cancel()
	<-m.done
}

func (m *mount) add(t *testing.T, ops ...wire.ApplyOp) uint64 {
	t.Helper()
	var last uint64
	for _, op := range ops {
		seq, err := m.ob.Add(op)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	return last
}

type appender interface{ AppendTo([]byte) []byte }

func op(o wire.Op, m appender) wire.ApplyOp { return wire.ApplyOp{Op: o, Body: m.AppendTo(nil)} }

func mkdir(p string) wire.ApplyOp {
	return op(wire.OpMkdir, &wire.MkdirReq{Share: shareName, Path: p, Mode: 0o755, Flags: wire.NameExclusive})
}

// create makes p exclusively with data: applied twice, it would fail with EEXIST.
func create(p, data string) wire.ApplyOp {
	return op(wire.OpCreate, &wire.CreateReq{Share: shareName, Path: p, Mode: 0o644,
		Flags: wire.CreateExclusive | wire.CreateWithData, Data: []byte(data)})
}

func write(p string, off uint64, data string) wire.ApplyOp {
	return wire.ApplyOp{Op: wire.OpWrite, Body: append((&wire.WriteReq{Share: shareName, Path: p, Offset: off}).AppendTo(nil), data...)}
}

func rename(from, to string) wire.ApplyOp {
	return op(wire.OpRename, &wire.RenameReq{Share: shareName, From: from, To: to})
}

func unlink(p string) wire.ApplyOp {
	return op(wire.OpUnlink, &wire.PathReq{Share: shareName, Path: p})
}

// tree makes n folders of files through the journal: each file created, appended to,
// renamed, and one in each folder removed.
func tree(prefix string, n int) (ops []wire.ApplyOp, want map[string]string) {
	want = map[string]string{}
	for d := range n {
		dir := fmt.Sprintf("%s%03d", prefix, d)
		ops = append(ops, mkdir(dir))
		for f := range 4 {
			tmp, final := fmt.Sprintf("%s/.f%d.tmp", dir, f), fmt.Sprintf("%s/f%d", dir, f)
			body := fmt.Sprintf("file %d of %s\n", f, dir)
			ops = append(ops, create(tmp, body), write(tmp, uint64(len(body)), "more\n"), rename(tmp, final))
			want[final] = body + "more\n"
		}
		ops = append(ops, unlink(dir+"/f3"))
		delete(want, dir+"/f3")
	}
	return ops, want
}

// checkFiles compares the owner's files named in want with their contents.
func checkFiles(t *testing.T, root string, want map[string]string) {
	t.Helper()
	for p, content := range want {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(got) != content {
			t.Fatalf("%s on the owner: %q, %v; want %q", p, got, err, content)
		}
	}
}

func syncAll(t *testing.T, m *mount, last uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.ob.Sync(ctx, last); err != nil {
		t.Fatalf("sync to op %d: %v (status %+v)", last, err, m.ob.Status())
	}
}

// A journal of 1,050 ops drains into the real owner in order, once each; a mount that dies
// after the owner applied its ops but before they were durable sends them again, and the
// owner applies none of them twice (their exclusive creates would fail).
func TestJournalIntoRealOwner(t *testing.T) {
	o := newOwner(t)
	l := &linker{sess: o.link()}
	dir := t.TempDir()
	m := openMount(t, dir, l)
	ops, want := tree("d", 75)
	last := m.add(t, ops...)
	syncAll(t, m, last)
	checkFiles(t, o.dir, want)
	for seq := uint64(1); seq <= last; seq++ {
		if r := m.res.of(seq); r.Code != 0 {
			t.Fatalf("op %d: %v %s", seq, r.Code, r.Body)
		}
	}
	if _, err := os.Stat(filepath.Join(o.dir, "d000/f3")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("d000/f3 should be gone: %v", err)
	}

	// More ops, applied but not made durable; then the mount dies and comes back, and the
	// owner restarts too (a new store over the same records).
	more, wantMore := tree("e", 10)
	last2 := m.add(t, more...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.ob.WaitApplied(ctx, last2); err != nil {
		t.Fatal(err)
	}
	if st := m.ob.Status(); st.Durable >= last2 {
		t.Fatalf("test needs ops applied and not durable: %+v", st)
	}
	m.stop()
	l.swap(o.link())
	m2 := openMount(t, dir, l)
	syncAll(t, m2, last2)
	checkFiles(t, o.dir, wantMore)
	for seq := last + 1; seq <= last2; seq++ {
		if r := m2.res.of(seq); r.Code != 0 || len(r.Body) != 0 {
			t.Fatalf("op %d sent again: code %v body %q, want 0 and empty (applied before)", seq, r.Code, r.Body)
		}
	}
	m2.stop()
	if err := m2.ob.Close(); err != nil {
		t.Fatal(err)
	}
}

// A change made on the owner's disk meanwhile is not overwritten: the journal's op with the
// state it knew is a CONFLICT and the owner's file stays as it is. The journal's own later
// ops on a file it changed are not conflicts.
func TestJournalConflictWithRealOwner(t *testing.T) {
	o := newOwner(t)
	sharetest.WriteFile(t, filepath.Join(o.dir, "notes.txt"), "v1\n", 0o644)
	st, err := o.sh.Stat("notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	base := st.State()
	l := &linker{sess: o.link()}
	m := openMount(t, t.TempDir(), l)
	mine := func(off uint64, data string) wire.ApplyOp {
		w := write("notes.txt", off, data)
		w.Flags, w.Base = wire.ApplyHasBase, base
		return w
	}
	first := m.add(t, mine(3, "mount a\n"), mine(11, "mount b\n"))
	syncAll(t, m, first)
	for _, seq := range []uint64{first - 1, first} {
		if r := m.res.of(seq); r.Code != 0 {
			t.Fatalf("own write %d: %v %s", seq, r.Code, r.Body)
		}
	}
	checkFiles(t, o.dir, map[string]string{"notes.txt": "v1\nmount a\nmount b\n"})

	// Someone edits the file on the owner; the mount, which knew the old state, writes.
	time.Sleep(10 * time.Millisecond) // a distinct mtime on file systems with coarse clocks
	sharetest.WriteFile(t, filepath.Join(o.dir, "notes.txt"), "edited on the owner\n", 0o644)
	stale := m.add(t, mine(0, "overwrite"))
	syncAll(t, m, stale)
	r := m.res.of(stale)
	if r.Code != wire.ErrnoConflict {
		t.Fatalf("write over an owner's edit: code %v, want CONFLICT", r.Code)
	}
	var now wire.Entry
	if err := now.Decode(r.Body); err != nil || now.Size != uint64(len("edited on the owner\n")) {
		t.Fatalf("conflict body: %+v, %v", now, err)
	}
	checkFiles(t, o.dir, map[string]string{"notes.txt": "edited on the owner\n"})
	if st := m.ob.Status(); st.Conflicts != 1 {
		t.Fatalf("status counts %d conflicts, want 1", st.Conflicts)
	}
	m.stop()
}

// Offline: with the link gone the journal keeps taking ops and says it is offline; a new link
// and a Kick drain it.
func TestJournalOfflineThenDrains(t *testing.T) {
	o := newOwner(t)
	first := o.link()
	l := &linker{sess: first}
	m := openMount(t, t.TempDir(), l)
	first.Close(errors.New("test: the link is cut"))
	ops, want := tree("p", 5)
	last := m.add(t, ops...)
	deadline := time.Now().Add(10 * time.Second)
	for m.ob.Status().Online {
		if time.Now().After(deadline) {
			t.Fatalf("still online with the link cut: %+v", m.ob.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := m.ob.Status(); st.Waiting != last || st.LastError == nil {
		t.Fatalf("offline status: %+v, want %d waiting and the error", st, last)
	}
	l.swap(o.link())
	m.ob.Kick()
	syncAll(t, m, last)
	checkFiles(t, o.dir, want)
	if st := m.ob.Status(); !st.Online || st.Waiting != 0 {
		t.Fatalf("after the drain: %+v", st)
	}
	m.stop()
}

// BenchmarkDrainIntoRealOwner: how fast a journal reaches the real owner on loopback, from the
// first Add until the owner has made the last op durable (Sync). creates: a new file with 4 KiB
// of data per op (b.N ops); writes: 1 MiB WRITEs into one file (b.N MiB).
func BenchmarkDrainIntoRealOwner(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"creates-4KiB", 4 << 10}, {"writes-1MiB", 1 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			sh, err := share.Open(shareName, dir, false)
			if err != nil {
				b.Fatal(err)
			}
			store, err := serve.NewJournalStore(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			h := &serve.Handler{
				Lookup:   func(name string) (*share.Share, bool) { return sh, name == shareName },
				List:     func() []wire.ShareInfo { return []wire.ShareInfo{{Name: shareName}} },
				Journals: store,
			}
			l := &linker{sess: sharetest.Serve(b, h).S}
			ob, err := outbox.Open(outbox.Options{Dir: b.TempDir(), SyncAfter: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer ob.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go ob.Run(ctx, remote.NewShare(l, shareName))
			data := string(make([]byte, bc.size))
			if bc.size == 1<<20 {
				if _, err := ob.Add(create("big.bin", "")); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			var last uint64
			for i := range b.N {
				o := create(fmt.Sprintf("f%07d", i), data)
				if bc.size == 1<<20 {
					o = write("big.bin", uint64(i)<<20, data)
				}
				if last, err = ob.Add(o); err != nil {
					b.Fatal(err)
				}
			}
			if err := ob.Sync(ctx, last); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			if st := ob.Status(); st.Failed != 0 {
				b.Fatalf("%d ops failed: %v", st.Failed, st.LastError)
			}
		})
	}
}
