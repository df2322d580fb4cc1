package serve

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// applyPeer serves sh with the journal store s over a real link.
func applyPeer(t *testing.T, sh *share.Share, s *JournalStore) remote.Peer {
	t.Helper()
	h := handlerFor(sh)
	h.Journals = s
	return sharetest.Serve(t, h)
}

// send sends one APPLY and decodes its reply.
func send(t *testing.T, p remote.Peer, req *wire.ApplyReq) (wire.ApplyResp, error) {
	t.Helper()
	buf, err := p.S.Call(context.Background(), wire.OpApply, req.AppendTo(nil))
	if err != nil {
		return wire.ApplyResp{}, err
	}
	defer buf.Release()
	var resp wire.ApplyResp
	if err := resp.Decode(buf.Payload()); err != nil {
		t.Fatalf("APPLY reply: %v", err)
	}
	return resp, nil
}

// mustSend is send for a batch that must be answered.
func mustSend(t *testing.T, p remote.Peer, req *wire.ApplyReq) wire.ApplyResp {
	t.Helper()
	resp, err := send(t, p, req)
	if err != nil {
		t.Fatalf("APPLY: %v", err)
	}
	return resp
}

type appender interface{ AppendTo([]byte) []byte }

func op(o wire.Op, m appender) wire.ApplyOp { return wire.ApplyOp{Op: o, Body: m.AppendTo(nil)} }

func opMkdir(path string) wire.ApplyOp {
	return op(wire.OpMkdir, &wire.MkdirReq{Share: "test", Path: path, Mode: 0o755})
}

func opCreate(path, data string) wire.ApplyOp {
	return op(wire.OpCreate, &wire.CreateReq{Share: "test", Path: path, Mode: 0o644,
		Flags: wire.CreateExclusive | wire.CreateWithData, Data: []byte(data)})
}

func opWrite(path string, off uint64, data string) wire.ApplyOp {
	head := wire.WriteReq{Share: "test", Path: path, Offset: off}
	return wire.ApplyOp{Op: wire.OpWrite, Body: append(head.AppendTo(nil), data...)}
}

func opRename(from, to string) wire.ApplyOp {
	return op(wire.OpRename, &wire.RenameReq{Share: "test", From: from, To: to})
}

func opChmod(path string, mode uint32) wire.ApplyOp {
	return op(wire.OpSetAttr, &wire.SetAttrReq{Share: "test", Path: path, Valid: wire.SetMode, Mode: mode})
}

func opUnlink(path string) wire.ApplyOp {
	return op(wire.OpUnlink, &wire.PathReq{Share: "test", Path: path})
}

// withBase gives o the Base st.
func withBase(o wire.ApplyOp, st wire.FileState) wire.ApplyOp {
	o.Flags |= wire.ApplyHasBase
	o.Base = st
	return o
}

var journalA = wire.JournalID{0xa, 1, 2, 3}

// mixedBatch makes d, d/g ("onetwo", 0600) from d/f, and removes a.txt.
func mixedBatch() *wire.ApplyReq {
	return &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{
		opMkdir("d"),
		opCreate("d/f", "one"),
		opWrite("d/f", 3, "two"),
		opRename("d/f", "d/g"),
		opChmod("d/g", 0o600),
		opUnlink("a.txt"),
	}}
}

// checkMixed checks the share after mixedBatch.
func checkMixed(t *testing.T, tr sharetest.Tree) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.Share, "d", "g"))
	if err != nil || string(b) != "onetwo" {
		t.Errorf("d/g: %q, %v; want \"onetwo\"", b, err)
	}
	if fi, err := os.Stat(filepath.Join(tr.Share, "d", "g")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("d/g mode: %v, %v; want 0600", fi, err)
	}
	for _, gone := range []string{"d/f", "a.txt"} {
		if _, err := os.Lstat(filepath.Join(tr.Share, gone)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it gone", gone, err)
		}
	}
}

// TestApplyInOrder: a batch of mixed ops is applied in order, each answered with its own
// request's reply body.
func TestApplyInOrder(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	resp := mustSend(t, p, mixedBatch())
	if resp.Applied != 6 || len(resp.Results) != 6 {
		t.Fatalf("Applied %d, %d results; want 6, 6", resp.Applied, len(resp.Results))
	}
	for i, r := range resp.Results {
		if r.Code != 0 {
			t.Errorf("op %d: code %v: %s", i, r.Code, r.Body)
		}
	}
	checkMixed(t, tr)
	var dir, created wire.Entry
	var written, chmodded wire.ChangeResp
	if err := dir.Decode(resp.Results[0].Body); err != nil || dir.Mode&wire.ModeDir == 0 {
		t.Errorf("MKDIR's result: %+v, %v; want a directory's Entry", dir, err)
	}
	if err := created.Decode(resp.Results[1].Body); err != nil || created.Size != 3 {
		t.Errorf("CREATE's result: %+v, %v; want an Entry of size 3", created, err)
	}
	if err := written.Decode(resp.Results[2].Body); err != nil || written.Entry.Size != 6 || written.Pre.Size != 3 {
		t.Errorf("WRITE's result: %+v, %v; want size 6 after 3", written, err)
	}
	if err := chmodded.Decode(resp.Results[4].Body); err != nil || chmodded.Entry.Mode&0o777 != 0o600 {
		t.Errorf("SETATTR's result: %+v, %v; want mode 0600", chmodded, err)
	}
	if len(resp.Results[3].Body) != 0 || len(resp.Results[5].Body) != 0 {
		t.Errorf("RENAME and UNLINK answer nothing: %q, %q", resp.Results[3].Body, resp.Results[5].Body)
	}
}

// checkNothingAgain: a batch already applied is answered op by op with empty bodies and the
// same Applied, and the share is as the first time.
func checkNothingAgain(t *testing.T, tr sharetest.Tree, resp wire.ApplyResp) {
	t.Helper()
	if resp.Applied != 6 || len(resp.Results) != 6 {
		t.Fatalf("sent again: Applied %d, %d results; want 6, 6", resp.Applied, len(resp.Results))
	}
	for i, r := range resp.Results {
		if r.Code != 0 || len(r.Body) != 0 {
			t.Errorf("sent again, op %d: code %v, body %q; want 0 and nothing (applied before)", i, r.Code, r.Body)
		}
	}
	checkMixed(t, tr)
}

// TestApplyResent: a batch sent again (its reply lost) applies nothing twice: the exclusive
// CREATE would fail, the WRITE would find no d/f.
func TestApplyResent(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	mustSend(t, p, mixedBatch())
	checkNothingAgain(t, tr, mustSend(t, p, mixedBatch()))
}

// TestApplyOwnerRestart: a new store over the same directory (the owner's daemon restarted)
// knows what the journal applied.
func TestApplyOwnerRestart(t *testing.T) {
	tr, sh := openTree(t, false)
	dir := t.TempDir()
	mustSend(t, applyPeer(t, sh, newStore(t, dir)), mixedBatch())
	p := applyPeer(t, sh, newStore(t, dir))
	checkNothingAgain(t, tr, mustSend(t, p, mixedBatch()))
}

// TestApplyOutOfOrder: a batch that arrives before the one it follows waits for it; one
// whose predecessors never come gets no results and the owner's Applied.
func TestApplyOutOfOrder(t *testing.T) {
	tr, sh := openTree(t, false)
	s := newStore(t, t.TempDir())
	s.gapWait = 10 * time.Second // the first batch comes long before
	p := applyPeer(t, sh, s)
	first := &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{
		opCreate("f", "x"), opWrite("f", 1, "y"),
	}}
	second := &wire.ApplyReq{Share: "test", Journal: journalA, First: 3, Ops: []wire.ApplyOp{
		opRename("f", "g"), opWrite("g", 2, "z"),
	}}
	var wg sync.WaitGroup
	var resp2 wire.ApplyResp
	var err2 error
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp2, err2 = send(t, p, second)
	}()
	time.Sleep(200 * time.Millisecond) // the second is waiting
	resp1 := mustSend(t, p, first)
	wg.Wait()
	if err2 != nil {
		t.Fatal(err2)
	}
	for _, r := range append(resp1.Results, resp2.Results...) {
		if r.Code != 0 {
			t.Errorf("code %v: %s", r.Code, r.Body)
		}
	}
	if len(resp2.Results) != 2 || resp2.Applied != 4 {
		t.Errorf("second batch: %d results, Applied %d; want 2, 4", len(resp2.Results), resp2.Applied)
	}
	if b, err := os.ReadFile(filepath.Join(tr.Share, "g")); string(b) != "xyz" {
		t.Errorf("g: %q, %v; want \"xyz\"", b, err)
	}

	s.gapWait = 100 * time.Millisecond
	gap := &wire.ApplyReq{Share: "test", Journal: journalA, First: 10, Ops: []wire.ApplyOp{opMkdir("late")}}
	resp := mustSend(t, p, gap)
	if len(resp.Results) != 0 || resp.Applied != 4 {
		t.Errorf("batch after a gap: %d results, Applied %d; want none, 4", len(resp.Results), resp.Applied)
	}
	if _, err := os.Lstat(filepath.Join(tr.Share, "late")); !os.IsNotExist(err) {
		t.Errorf("an op after a gap was applied: %v", err)
	}
}

// TestApplyConflict: an op whose file changed on the owner since its Base is a conflict and
// is not applied; the journal's own changes of one file do not conflict with each other; a
// missing file with a Base is a conflict.
func TestApplyConflict(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	stateOf := func(name string) wire.FileState {
		e, err := sh.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return e.State()
	}
	aBase, bBase := stateOf("a.txt"), stateOf("sub/b.txt")
	if err := os.WriteFile(filepath.Join(tr.Share, "a.txt"), []byte("edited on the owner"), 0o640); err != nil {
		t.Fatal(err)
	}
	resp := mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{
		withBase(opWrite("a.txt", 0, "mount's"), aBase),
		withBase(opWrite("sub/b.txt", 3, "1"), bBase),
		withBase(opWrite("sub/b.txt", 4, "2"), bBase),
		withBase(opChmod("sub/b.txt", 0o600), bBase),
		withBase(opWrite("nope", 0, "x"), bBase),
	}})
	if len(resp.Results) != 5 || resp.Applied != 5 {
		t.Fatalf("%d results, Applied %d; want 5, 5", len(resp.Results), resp.Applied)
	}
	var now wire.Entry
	if r := resp.Results[0]; r.Code != wire.ErrnoConflict || now.Decode(r.Body) != nil || now.Size != uint64(len("edited on the owner")) {
		t.Errorf("write over an owner's edit: code %v, entry %+v; want CONFLICT with the file now", r.Code, now)
	}
	if b, _ := os.ReadFile(filepath.Join(tr.Share, "a.txt")); string(b) != "edited on the owner" {
		t.Errorf("a.txt: %q, the owner's edit is lost", b)
	}
	for i := 1; i <= 3; i++ {
		if r := resp.Results[i]; r.Code != 0 {
			t.Errorf("the journal's own change %d of sub/b.txt: code %v: %q", i, r.Code, r.Body)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(tr.Share, "sub", "b.txt")); string(b) != "bee12" {
		t.Errorf("sub/b.txt: %q, want \"bee12\"", b)
	}
	if r := resp.Results[4]; r.Code != wire.ErrnoConflict || len(r.Body) != 0 {
		t.Errorf("a missing file with a base: code %v, body %q; want CONFLICT, empty", r.Code, r.Body)
	}
	if _, err := os.Lstat(filepath.Join(tr.Share, "nope")); !os.IsNotExist(err) {
		t.Errorf("nope: %v, want it never made", err)
	}
}

// TestApplyFailedOp: an op that fails is answered with its code and text, and the ops after
// it are applied.
func TestApplyFailedOp(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	resp := mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{
		opCreate("x", "1"), opUnlink("missing"), opCreate("y", "2"),
	}})
	if len(resp.Results) != 3 || resp.Applied != 3 {
		t.Fatalf("%d results, Applied %d; want 3, 3", len(resp.Results), resp.Applied)
	}
	if r := resp.Results[1]; r.Code != wire.ENOENT || !strings.Contains(string(r.Body), "missing") {
		t.Errorf("unlink of a missing file: code %v, text %q; want ENOENT naming it", r.Code, r.Body)
	}
	if r := resp.Results[2]; r.Code != 0 {
		t.Errorf("op after the failed one: code %v: %s", r.Code, r.Body)
	}
	if b, err := os.ReadFile(filepath.Join(tr.Share, "y")); string(b) != "2" {
		t.Errorf("y: %q, %v", b, err)
	}
}

// recordOf reads the applied and durable marks of the only record under dir.
func recordOf(t *testing.T, dir string) (applied, durable uint64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != 1 {
		t.Fatalf("records under %s: %v, want one", dir, files)
	}
	j := &journal{id: journalA, path: files[0]}
	if err := j.load(); err != nil {
		t.Fatal(err)
	}
	return j.applied, j.durable
}

// TestApplySync: without SYNC Durable stays where it was, with SYNC it is Applied, in the
// reply and in the record on disk.
func TestApplySync(t *testing.T) {
	_, sh := openTree(t, false)
	dir := t.TempDir()
	p := applyPeer(t, sh, newStore(t, dir))
	resp := mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opCreate("x", "1")}})
	if resp.Applied != 1 || resp.Durable != 0 {
		t.Errorf("without SYNC: Applied %d, Durable %d; want 1, 0", resp.Applied, resp.Durable)
	}
	if a, d := recordOf(t, dir); a != 1 || d != 0 {
		t.Errorf("record after the first op: applied %d, durable %d; want 1, 0", a, d)
	}
	resp = mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 2, Flags: wire.ApplySync,
		Ops: []wire.ApplyOp{opCreate("y", "2")}})
	if resp.Applied != 2 || resp.Durable != 2 {
		t.Errorf("with SYNC: Applied %d, Durable %d; want 2, 2", resp.Applied, resp.Durable)
	}
	if a, d := recordOf(t, dir); a != 2 || d != 2 {
		t.Errorf("record after SYNC: applied %d, durable %d; want 2, 2", a, d)
	}
	resp = mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 3})
	if resp.Applied != 2 || resp.Durable != 2 || len(resp.Results) != 0 {
		t.Errorf("a question: %+v; want Applied and Durable 2, no results", resp)
	}
}

// TestApplyRefused: a batch with a bad op is refused whole (PROTOCOL), nothing applied; a
// read-only share refuses APPLY (EROFS).
func TestApplyRefused(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	other := op(wire.OpMkdir, &wire.MkdirReq{Share: "other", Path: "p2", Mode: 0o755})
	stat := op(wire.OpStat, &wire.PathReq{Share: "test", Path: "a.txt"})
	badFlags := opMkdir("p2")
	badFlags.Flags = 0x80
	for name, req := range map[string]*wire.ApplyReq{
		"another share":     {Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opMkdir("p1"), other}},
		"op not applicable": {Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opMkdir("p1"), stat}},
		"unknown op flags":  {Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opMkdir("p1"), badFlags}},
		"unknown flags":     {Share: "test", Journal: journalA, First: 1, Flags: 0x80, Ops: []wire.ApplyOp{opMkdir("p1")}},
		"malformed body":    {Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opMkdir("p1"), {Op: wire.OpMkdir, Body: []byte{1}}}},
	} {
		_, err := send(t, p, req)
		if code := remoteCode(err); code != wire.ErrnoProtocol {
			t.Errorf("%s: %v (code %v), want PROTOCOL", name, err, code)
		}
	}
	if _, err := os.Lstat(filepath.Join(tr.Share, "p1")); !os.IsNotExist(err) {
		t.Errorf("p1 was made by a refused batch: %v", err)
	}

	_, ro := openTree(t, true)
	before := sharetest.Snapshot(t, ro.Dir())
	_, err := send(t, applyPeer(t, ro, newStore(t, t.TempDir())), mixedBatch())
	if code := remoteCode(err); code != wire.EROFS {
		t.Errorf("read-only share: %v (code %v), want EROFS", err, code)
	}
	sharetest.SameSnapshot(t, "read-only share", before, sharetest.Snapshot(t, ro.Dir()))
}

// TestApplyDamagedRecord: a record that fails its checksum refuses the journal's APPLYs
// (EIO) rather than applying its ops again.
func TestApplyDamagedRecord(t *testing.T) {
	tr, sh := openTree(t, false)
	dir := t.TempDir()
	mustSend(t, applyPeer(t, sh, newStore(t, dir)), mixedBatch())
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != 1 {
		t.Fatalf("records: %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[21] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = send(t, applyPeer(t, sh, newStore(t, dir)), mixedBatch())
	if code := remoteCode(err); code != wire.EIO {
		t.Errorf("damaged record: %v (code %v), want EIO", err, code)
	}
	checkMixed(t, tr)
	if b2, _ := os.ReadFile(files[0]); !bytes.Equal(b, b2) {
		t.Error("the damaged record was overwritten")
	}
}

// TestApplyRefusedPath: an op whose path the owner refuses fails alone (PATH_REFUSED), as its
// request alone would, and the journal goes on.
func TestApplyRefusedPath(t *testing.T) {
	tr, sh := openTree(t, false)
	p := applyPeer(t, sh, newStore(t, t.TempDir()))
	resp := mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{
		opMkdir("../escape"), opMkdir("p3"),
	}})
	if len(resp.Results) != 2 || resp.Applied != 2 {
		t.Fatalf("%d results, Applied %d; want 2, 2", len(resp.Results), resp.Applied)
	}
	if r := resp.Results[0]; r.Code != wire.ErrnoPathRefused {
		t.Errorf("refused path: code %v, %s; want PATH_REFUSED", r.Code, r.Body)
	}
	if r := resp.Results[1]; r.Code != 0 {
		t.Errorf("the op after it: code %v, %s", r.Code, r.Body)
	}
	if _, err := os.Stat(filepath.Join(tr.Base, "escape")); !os.IsNotExist(err) {
		t.Errorf("escape: %v, want it never made", err)
	}
}

// TestApplyStopsEarly: past its deadline an APPLY answers the ops it applied and no more; the
// others are not applied, and the batch sent again applies them.
func TestApplyStopsEarly(t *testing.T) {
	tr, sh := openTree(t, false)
	s := newStore(t, t.TempDir())
	p := applyPeer(t, sh, s)
	s.deadline = -1 // past before the first op
	resp := mustSend(t, p, mixedBatch())
	if len(resp.Results) != 0 || resp.Applied != 0 {
		t.Fatalf("past the deadline: %d results, Applied %d; want none, 0", len(resp.Results), resp.Applied)
	}
	if _, err := os.Lstat(filepath.Join(tr.Share, "d")); !os.IsNotExist(err) {
		t.Errorf("an op without a result was applied: %v", err)
	}
	s.deadline = 10 * time.Second
	if resp := mustSend(t, p, mixedBatch()); len(resp.Results) != 6 || resp.Applied != 6 {
		t.Errorf("sent again: %d results, Applied %d; want 6, 6", len(resp.Results), resp.Applied)
	}
	checkMixed(t, tr)
}

// TestApplyJournalsIndependent: a batch of one journal waiting for its predecessors holds up
// no other journal.
func TestApplyJournalsIndependent(t *testing.T) {
	tr, sh := openTree(t, false)
	s := newStore(t, t.TempDir())
	s.gapWait = 10 * time.Second
	p := applyPeer(t, sh, s)
	waiting := make(chan wire.ApplyResp, 1)
	go func() {
		resp, _ := send(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 2, Ops: []wire.ApplyOp{opMkdir("a2")}})
		waiting <- resp
	}()
	time.Sleep(100 * time.Millisecond) // journal A's batch is waiting
	journalB := wire.JournalID{0xb}
	if resp := mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalB, First: 1, Ops: []wire.ApplyOp{opMkdir("b1")}}); resp.Applied != 1 {
		t.Errorf("journal B: Applied %d, want 1", resp.Applied)
	}
	select {
	case <-waiting:
		t.Fatal("journal A's batch after a gap was answered before its wait ended")
	default:
	}
	mustSend(t, p, &wire.ApplyReq{Share: "test", Journal: journalA, First: 1, Ops: []wire.ApplyOp{opMkdir("a1")}})
	if resp := <-waiting; resp.Applied != 2 || len(resp.Results) != 1 {
		t.Errorf("journal A's second batch: %+v, want applied after the first", resp)
	}
	for _, d := range []string{"a1", "a2", "b1"} {
		if _, err := os.Stat(filepath.Join(tr.Share, d)); err != nil {
			t.Error(err)
		}
	}
}
