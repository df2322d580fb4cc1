package fusefs

// Writes that do not wait for the owner (mount --writes journal).
//
// With a journal (Options.Journal, an internal/outbox), the owner the mount's operations talk
// to is a journalOwner. A change the mount can decide from what it knows (the replica lists
// the folder, so it knows whether a name is taken or a folder empty) is recorded in the
// journal and answered at once with the entry the owner will make: a provisional inode number
// (as for files created here, create.go), this machine's clock. The outbox sends the journal
// in order, many changes per APPLY and several APPLYs in flight, and the owner applies them in
// that order, once each. Everything else waits for the journal first:
//
//   - a change the mount cannot decide here (a name in a folder it has not listed, an xattr,
//     fallocate) waits until every change before it is applied, then goes to the owner alone;
//   - a question to the owner (a lookup, a listing, a read of contents not held here) waits
//     until every change before it is applied, so that its answer includes them: the mount
//     reads its own writes, and the owner's answers never take them back;
//   - fsync waits until everything before it is durable on the owner.
//
// Offline, a question that would wait for waiting changes fails at once (EIO); the replica and
// the cache answer the rest, and changes keep going into the journal up to its budget (then
// ENOSPC). A change the owner refuses (EACCES, ENOSPC, a share made read-only) is logged,
// listed in the mount's refusals (Refusals) and reported by the next fsync or close of its
// path, as NFS reports a deferred write error.
//
// When a change's result arrives, the mount learns the owner's entry for it: the owner's inode
// number maps to the provisional one (Root.kernelIno), the replica takes the entry, and the
// file's node records the state as its own, so the owner's change event for it is an echo
// (pages.go). Change events for a path with changes still waiting are held until they are
// applied: they describe a state the mount has already moved past.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/outbox"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
)

// rescanKey holds rescans in journalOwner.held: no path is empty and NUL.
const rescanKey = "\x00"

// maxRefusals is how many of the latest refusals a mount lists.
const maxRefusals = 100

// Refusal is a journaled change the owner did not apply.
type Refusal struct {
	Time time.Time
	Op   string // the request: CREATE, WRITE, RENAME...
	Path string
	Err  string
}

// journalOwner is the owner as a journaling mount sees it (see above).
type journalOwner struct {
	Owner // the owner itself: questions, and changes that cannot be journaled
	r     *Root
	box   *outbox.Outbox
	// wait bounds how long a question waits for the journal while the owner is online.
	wait time.Duration

	mu       sync.Mutex
	waiting  map[uint64]*journaled   // ops added in this process without a result yet
	pending  map[string]int          // path -> waiting ops that change it or a name in it
	held     map[string][]wire.Event // the owner's events of paths with ops waiting
	failures map[string]error        // path -> a refusal its next fsync or close reports
	refusals []Refusal               // the latest maxRefusals, oldest first
	refused  uint64
	dead     map[uint64]bool // provisional inode numbers whose file went before its result came
}

// journaled is one op waiting for its result.
type journaled struct {
	op      wire.Op
	paths   []string // the paths it changes; paths[0] names it in refusals
	counted []string // the paths and their folders, as counted in pending
	// learn takes what the owner answered (an Entry, a ChangeResp) once it is applied.
	learn func(body []byte)
}

func newJournalOwner(r *Root, owner Owner, box *outbox.Outbox, wait time.Duration) *journalOwner {
	if wait <= 0 {
		wait = 30 * time.Second
	}
	return &journalOwner{Owner: owner, r: r, box: box, wait: wait,
		waiting: map[uint64]*journaled{}, pending: map[string]int{}, held: map[string][]wire.Event{},
		failures: map[string]error{}, dead: map[uint64]bool{}}
}

// errOfflineWaiting is what a question answers when the owner is unreachable and changes of
// this mount wait for it: its answer could not include them.
var errOfflineWaiting = errors.New("the owner is unreachable and this mount's changes wait for it: " +
	"only what the mount holds can be read until it is back")

// settle waits until every change recorded so far is applied on the owner (or reported
// refused), so that a question asked next is answered with them.
func (j *journalOwner) settle(ctx context.Context) error {
	if st := j.box.Status(); st.Applied >= j.box.Last() {
		return nil
	}
	j.r.stats.roundTrips.Add(1) // a wait for the owner, at least one round trip
	return j.waitFor(ctx, false)
}

// waitPoll is how often a wait for the journal looks at whether the owner went away or
// refuses it.
const waitPoll = 250 * time.Millisecond

// waitFor waits until every change recorded so far is applied on the owner (durable: and
// made durable there). It fails at once offline (errOfflineWaiting), with the owner's error
// when the owner refuses the journal's batches (a share made read-only: they stay in the
// journal until it takes them), and after j.wait otherwise.
func (j *journalOwner) waitFor(ctx context.Context, durable bool) error {
	last, start := j.box.Last(), time.Now()
	for {
		st := j.box.Status()
		if !st.Online {
			return errOfflineWaiting
		}
		var re *wire.RemoteError
		if st.LastError != nil && st.LastErrorAt.After(start) && errors.As(st.LastError, &re) {
			return fmt.Errorf("the owner refuses this mount's changes, which stay in its journal: %w", re)
		}
		if time.Since(start) > j.wait {
			return fmt.Errorf("this mount's changes did not reach the owner within %v: %w", j.wait, context.DeadlineExceeded)
		}
		wctx, cancel := context.WithTimeout(ctx, waitPoll)
		var err error
		if durable {
			err = j.box.Sync(wctx, last)
		} else {
			err = j.box.WaitApplied(wctx, last)
		}
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("waiting for this mount's changes to reach the owner: %w", err)
		}
	}
}

// direct waits for the journal before a change that goes to the owner alone (a round trip).
func (j *journalOwner) direct(ctx context.Context) error {
	j.r.stats.roundTrips.Add(1)
	return j.settle(ctx)
}

// Questions: answered with every change before them applied.

func (j *journalOwner) Stat(ctx context.Context, path string) (wire.Entry, error) {
	if err := j.settle(ctx); err != nil {
		return wire.Entry{}, err
	}
	return j.Owner.Stat(ctx, path)
}

func (j *journalOwner) List(ctx context.Context, path string, inlineMax uint32, add func([]wire.Entry) error) error {
	if err := j.settle(ctx); err != nil {
		return err
	}
	return j.Owner.List(ctx, path, inlineMax, add)
}

func (j *journalOwner) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	if err := j.settle(ctx); err != nil {
		return 0, err
	}
	return j.Owner.Read(ctx, path, off, dst)
}

func (j *journalOwner) Stream(ctx context.Context, path string, off, length int64) (wire.Entry, remote.ChunkStream, error) {
	if err := j.settle(ctx); err != nil {
		return wire.Entry{}, nil, err
	}
	return j.Owner.Stream(ctx, path, off, length)
}

func (j *journalOwner) GetXattr(ctx context.Context, path, name string) ([]byte, error) {
	if err := j.settle(ctx); err != nil {
		return nil, err
	}
	return j.Owner.GetXattr(ctx, path, name)
}

func (j *journalOwner) ListXattr(ctx context.Context, path string) ([]string, error) {
	if err := j.settle(ctx); err != nil {
		return nil, err
	}
	return j.Owner.ListXattr(ctx, path)
}

// Changes the mount cannot decide: alone, after the journal.

func (j *journalOwner) SetXattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	if err := j.direct(ctx); err != nil {
		return err
	}
	return j.Owner.SetXattr(ctx, path, name, value, flags)
}

func (j *journalOwner) RemoveXattr(ctx context.Context, path, name string) error {
	if err := j.direct(ctx); err != nil {
		return err
	}
	return j.Owner.RemoveXattr(ctx, path, name)
}

func (j *journalOwner) Fallocate(ctx context.Context, path string, mode uint32, off, length int64) (wire.Entry, error) {
	if err := j.direct(ctx); err != nil {
		return wire.Entry{}, err
	}
	return j.Owner.Fallocate(ctx, path, mode, off, length)
}

func (j *journalOwner) Mknod(ctx context.Context, path string, mode uint32, rdev uint64) (wire.Entry, error) {
	if err := j.direct(ctx); err != nil {
		return wire.Entry{}, err
	}
	return j.Owner.Mknod(ctx, path, mode, rdev)
}

// Fsync returns once every change recorded so far is durable on the owner, with the first
// refusal of path not reported yet.
func (j *journalOwner) Fsync(ctx context.Context, path string, dataOnly bool) error {
	if last := j.box.Last(); last > 0 && j.box.Status().Durable < last {
		if err := j.waitFor(ctx, true); err != nil {
			return err
		}
	}
	return j.takeFailure(path)
}

// Changes decided here.

func (j *journalOwner) Mkdir(ctx context.Context, path string, mode uint32) (wire.Entry, error) {
	if j.nameState(path) != nameFree {
		if err := j.direct(ctx); err != nil {
			return wire.Entry{}, err
		}
		return j.Owner.Mkdir(ctx, path, mode)
	}
	e := j.newEntry(path, wire.ModeDir|mode&0o7777)
	e.Nlink = 2
	req := wire.MkdirReq{Share: j.share(), Path: path, Mode: mode, Flags: wire.NameExclusive}
	return e, j.record(wire.OpMkdir, req.AppendTo(nil), []string{path}, j.learnEntry(path, e.Ino))
}

func (j *journalOwner) Symlink(ctx context.Context, path, target string) (wire.Entry, error) {
	if j.nameState(path) != nameFree {
		if err := j.direct(ctx); err != nil {
			return wire.Entry{}, err
		}
		return j.Owner.Symlink(ctx, path, target)
	}
	e := j.newEntry(path, wire.ModeSymlink|0o777)
	e.Target, e.Size = target, uint64(len(target))
	req := wire.SymlinkReq{Share: j.share(), Path: path, Target: target, Flags: wire.NameExclusive}
	return e, j.record(wire.OpSymlink, req.AppendTo(nil), []string{path}, j.learnEntry(path, e.Ino))
}

func (j *journalOwner) Create(ctx context.Context, path string, mode, flags uint32) (wire.Entry, error) {
	return j.CreateWith(ctx, wire.CreateReq{Path: path, Mode: mode, Flags: flags})
}

// CreateWith also carries the first data of files created here (create.go), whose name the
// replica shows with their provisional entry.
func (j *journalOwner) CreateWith(ctx context.Context, req wire.CreateReq) (wire.Entry, error) {
	var e wire.Entry
	switch state, cur := j.nameOf(req.Path); {
	case state == nameFree:
		e = j.newEntry(req.Path, wire.ModeRegular|req.Mode&0o7777)
	case state == nameTaken && cur.Ino >= localInoBase && cur.IsRegular():
		e = cur // made here (create.go): this CREATE makes it on the owner
	case state == nameTaken && cur.IsRegular() && req.Flags&wire.CreateExclusive == 0:
		e = cur // an open of an existing file with O_CREAT
		if req.Flags&wire.CreateTruncate != 0 {
			e.Size, e.Data, e.HasData = 0, nil, false
			e.MtimeNs, e.CtimeNs = now(), now()
		}
	case state == nameTaken && req.Flags&wire.CreateExclusive != 0:
		return wire.Entry{}, syscall.EEXIST
	default:
		if err := j.direct(ctx); err != nil {
			return wire.Entry{}, err
		}
		return j.Owner.CreateWith(ctx, req)
	}
	if req.Flags&wire.CreateSetTimes != 0 {
		e.AtimeNs, e.MtimeNs = req.AtimeNs, req.MtimeNs
	}
	if req.Flags&wire.CreateWithData != 0 {
		e.Size = max(e.Size, req.Offset+uint64(len(req.Data)))
		e.Data, e.HasData = nil, false
		e.MtimeNs, e.CtimeNs = now(), now()
	}
	// The file keeps the times the mount showed, not the owner's clock's when it applies
	// the CREATE: they would change under a program between a stat before and after.
	req.Flags |= wire.CreateSetTimes
	req.AtimeNs, req.MtimeNs = e.AtimeNs, e.MtimeNs
	req.Share = j.share()
	return e, j.record(wire.OpCreate, req.AppendTo(nil), []string{req.Path}, j.learnEntry(req.Path, e.Ino))
}

func (j *journalOwner) Write(ctx context.Context, path string, off int64, data []byte) (wire.ChangeResp, error) {
	cur, ok := j.r.replica.Stat(path)
	if !ok || !cur.IsRegular() {
		if err := j.direct(ctx); err != nil {
			return wire.ChangeResp{}, err
		}
		return j.Owner.Write(ctx, path, off, data)
	}
	resp := wire.ChangeResp{Pre: cur.State(), Entry: cur}
	e := &resp.Entry
	e.Size = max(e.Size, uint64(off)+uint64(len(data)))
	e.MtimeNs, e.CtimeNs = now(), now()
	e.Data, e.HasData = nil, false
	req := wire.WriteReq{Share: j.share(), Path: path, Offset: uint64(off)}
	body := append(req.AppendTo(make([]byte, 0, 64+len(path)+len(data))), data...)
	if err := j.record(wire.OpWrite, body, []string{path}, j.learnChange(path)); err != nil {
		return resp, err
	}
	// And the times the mount shows (see CreateWith).
	times := wire.SetAttrReq{Share: j.share(), Path: path, Valid: wire.SetMtime | wire.SetAtime, MtimeNs: e.MtimeNs, AtimeNs: e.AtimeNs}
	return resp, j.record(wire.OpSetAttr, times.AppendTo(nil), []string{path}, j.learnChange(path))
}

func (j *journalOwner) SetAttr(ctx context.Context, req wire.SetAttrReq) (wire.ChangeResp, error) {
	cur, ok := j.r.replica.Stat(req.Path)
	// A chown is the owner's to allow (its share's privileges, its daemon's rights).
	if !ok || req.Valid&(wire.SetUID|wire.SetGID) != 0 {
		if err := j.direct(ctx); err != nil {
			return wire.ChangeResp{}, err
		}
		return j.Owner.SetAttr(ctx, req)
	}
	resp := wire.ChangeResp{Pre: cur.State(), Entry: cur}
	e := &resp.Entry
	if req.Valid&wire.SetMode != 0 {
		e.Mode = e.Mode&^0o7777 | req.Mode&0o7777
	}
	if req.Valid&wire.SetUID != 0 {
		e.UID = req.UID
	}
	if req.Valid&wire.SetGID != 0 {
		e.GID = req.GID
	}
	if req.Valid&wire.SetSize != 0 {
		if !e.IsRegular() {
			return wire.ChangeResp{}, syscall.EINVAL
		}
		e.Size, e.Data, e.HasData = req.Size, nil, false
		e.MtimeNs = now()
	}
	if req.Valid&wire.SetMtime != 0 {
		e.MtimeNs = req.MtimeNs
	}
	if req.Valid&wire.SetAtime != 0 {
		e.AtimeNs = req.AtimeNs
	}
	e.CtimeNs = now()
	req.Share = j.share()
	return resp, j.record(wire.OpSetAttr, req.AppendTo(nil), []string{req.Path}, j.learnChange(req.Path))
}

func (j *journalOwner) Link(ctx context.Context, from, to string) (wire.Entry, error) {
	cur, ok := j.r.replica.Stat(from)
	if !ok || cur.IsDir() || j.nameState(to) != nameFree {
		if err := j.direct(ctx); err != nil {
			return wire.Entry{}, err
		}
		return j.Owner.Link(ctx, from, to)
	}
	e := cur
	e.Nlink++
	e.CtimeNs = now()
	req := wire.LinkReq{Share: j.share(), From: from, To: to}
	return e, j.record(wire.OpLink, req.AppendTo(nil), []string{to, from}, j.learnEntry(to, 0))
}

func (j *journalOwner) Unlink(ctx context.Context, path string) error {
	cur, ok := j.r.replica.Stat(path)
	if !ok || cur.IsDir() {
		if err := j.direct(ctx); err != nil {
			return err
		}
		return j.Owner.Unlink(ctx, path)
	}
	if cur.Nlink <= 1 {
		j.gone(cur.Ino)
	}
	req := wire.PathReq{Share: j.share(), Path: path}
	return j.record(wire.OpUnlink, req.AppendTo(nil), []string{path}, nil)
}

func (j *journalOwner) Rmdir(ctx context.Context, path string) error {
	cur, ok := j.r.replica.Stat(path)
	kids, listed := j.r.replica.Entries(path)
	if !ok || !cur.IsDir() || !listed {
		if err := j.direct(ctx); err != nil {
			return err
		}
		return j.Owner.Rmdir(ctx, path)
	}
	if visible(kids) > 0 {
		return syscall.ENOTEMPTY
	}
	if len(kids) > 0 {
		// Only files unlinked while open: the folder empties at their last close, and the
		// owner says when (Node.Rmdir tries again).
		if err := j.direct(ctx); err != nil {
			return err
		}
		return j.Owner.Rmdir(ctx, path)
	}
	j.gone(cur.Ino)
	req := wire.PathReq{Share: j.share(), Path: path}
	return j.record(wire.OpRmdir, req.AppendTo(nil), []string{path}, nil)
}

func (j *journalOwner) Rename(ctx context.Context, from, to string, flags uint32) error {
	if errno, decided := j.renameErrno(from, to, flags); decided {
		if errno != 0 {
			return errno
		}
		req := wire.RenameReq{Share: j.share(), From: from, To: to, Flags: flags}
		return j.record(wire.OpRename, req.AppendTo(nil), []string{from, to}, nil)
	}
	if err := j.direct(ctx); err != nil {
		return err
	}
	return j.Owner.Rename(ctx, from, to, flags)
}

// renameErrno decides a rename from the replica as rename(2) would: decided false when the
// replica does not know enough.
func (j *journalOwner) renameErrno(from, to string, flags uint32) (errno syscall.Errno, decided bool) {
	src, ok := j.r.replica.Stat(from)
	if !ok {
		return 0, false
	}
	state, dst := j.nameOf(to)
	switch {
	case state == nameUnknown:
		return 0, false
	case flags == wire.RenameExchange:
		if state != nameTaken {
			return syscall.ENOENT, true
		}
		return 0, true
	case state == nameFree:
		return 0, true
	case flags&wire.RenameNoReplace != 0:
		return syscall.EEXIST, true
	case src.Ino == dst.Ino:
		return 0, true // two names of one file: rename(2) does nothing, nor will the owner
	case src.IsDir() && !dst.IsDir():
		return syscall.ENOTDIR, true
	case !src.IsDir() && dst.IsDir():
		return syscall.EISDIR, true
	case dst.IsDir():
		kids, listed := j.r.replica.Entries(to)
		if !listed {
			return 0, false
		}
		if visible(kids) > 0 {
			return syscall.ENOTEMPTY, true
		}
		if len(kids) > 0 {
			return 0, false // only files unlinked while open: the owner decides
		}
		j.gone(dst.Ino)
		return 0, true
	}
	if dst.Nlink <= 1 {
		j.gone(dst.Ino)
	}
	return 0, true
}

// visible counts the names of a listing other than files unlinked while open.
func visible(kids []tree.DirEntry) int {
	n := 0
	for _, k := range kids {
		if !strings.HasPrefix(k.Name, hiddenPrefix) {
			n++
		}
	}
	return n
}

// Names as the replica knows them.

type nameState int

const (
	nameUnknown nameState = iota // the folder is not listed here
	nameFree
	nameTaken
)

func (j *journalOwner) nameState(p string) nameState {
	s, _ := j.nameOf(p)
	return s
}

func (j *journalOwner) nameOf(p string) (nameState, wire.Entry) {
	dir, name := tree.Split(p)
	e, found, listed := j.r.replica.Lookup(dir, name)
	switch {
	case !listed:
		return nameUnknown, e
	case found:
		return nameTaken, e
	}
	return nameFree, e
}

// share names the share in a journaled request's body, as a request sent alone does.
func (j *journalOwner) share() string { return j.r.opts.Share }

// newEntry is the entry of a name made here, before the owner numbers it.
func (j *journalOwner) newEntry(p string, mode uint32) wire.Entry {
	_, name := tree.Split(p)
	t := now()
	return wire.Entry{Name: name, Mode: mode, Nlink: 1, AtimeNs: t, MtimeNs: t, CtimeNs: t,
		UID: j.r.opts.OwnerUID, GID: j.r.opts.OwnerGID, Ino: localInoBase + j.r.localInos.Add(1)}
}

func now() int64 { return time.Now().UnixNano() }

// record puts op in the journal; learn (if any) takes its result once applied. The journal
// full is ENOSPC, as a full disk would be.
func (j *journalOwner) record(op wire.Op, body []byte, paths []string, learn func([]byte)) error {
	w := &journaled{op: op, paths: paths, learn: learn}
	for _, p := range paths {
		dir, _ := tree.Split(p)
		w.counted = append(w.counted, p, dir)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	seq, err := j.box.Add(wire.ApplyOp{Op: op, Body: body})
	if err != nil {
		if errors.Is(err, outbox.ErrFull) {
			j.r.log.Warn("the mount's journal is full: changes fail with ENOSPC until the owner takes some", "err", err)
			return syscall.ENOSPC
		}
		return err
	}
	j.waiting[seq] = w
	for _, p := range w.counted {
		j.pending[p]++
	}
	j.r.stats.journaled.Add(1)
	return nil
}

// result is the outbox's OnResult: what the owner did with op seq. It runs on the outbox's
// goroutine, never inside a FUSE operation.
func (j *journalOwner) result(seq uint64, op wire.ApplyOp, res wire.ApplyResult) {
	j.mu.Lock()
	w := j.waiting[seq]
	delete(j.waiting, seq)
	j.mu.Unlock()
	if w == nil {
		// Sent again after a restart of this daemon: nothing here waits for it.
		if res.Code != 0 {
			j.refuse(op.Op, "", res)
		}
		return
	}
	if res.Code != 0 {
		j.refuse(w.op, w.paths[0], res)
	} else if w.learn != nil && len(res.Body) > 0 {
		w.learn(res.Body)
	}
	var release []wire.Event
	j.mu.Lock()
	if len(j.waiting) == 0 {
		release = append(release, j.held[rescanKey]...)
		delete(j.held, rescanKey)
	}
	for _, p := range w.counted {
		if j.pending[p]--; j.pending[p] <= 0 {
			delete(j.pending, p)
			release = append(release, j.held[p]...)
			delete(j.held, p)
		}
	}
	j.mu.Unlock()
	if len(release) > 0 {
		// Not on this goroutine: telling the kernel to forget can wait for a FUSE operation
		// that waits for this result (an fsync).
		go j.r.ApplyEvents(release)
	}
}

// hold keeps an owner's event of a path with changes of this mount still waiting, to apply
// once they are: it describes a state the mount has moved past.
//
// A rescan (the owner's events may have been missed) waits for every change of this process
// to be applied: it makes the mount forget what it knows, and a question asked then waits for
// those changes, failing while the owner is away or refuses them, where the replica would have
// answered.
func (j *journalOwner) hold(ev wire.Event) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ev.Kind == wire.EventRescan {
		if len(j.waiting) == 0 {
			return false
		}
		j.held[rescanKey] = append(j.held[rescanKey], ev)
		return true
	}
	if j.pending[ev.Path] == 0 {
		return false
	}
	j.held[ev.Path] = append(j.held[ev.Path], ev)
	return true
}

// refuse records a change the owner did not apply.
func (j *journalOwner) refuse(op wire.Op, path string, res wire.ApplyResult) {
	err := &wire.RemoteError{Code: res.Code, Message: string(res.Body)}
	j.r.log.Warn("the owner refused a change this mount made: the next fsync or close of the file reports it",
		"op", op, "path", path, "err", err)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.refused++
	if path != "" {
		if _, ok := j.failures[path]; !ok {
			j.failures[path] = err
		}
	}
	j.refusals = append(j.refusals, Refusal{Time: time.Now(), Op: op.String(), Path: path, Err: err.Error()})
	if len(j.refusals) > maxRefusals {
		j.refusals = j.refusals[len(j.refusals)-maxRefusals:]
	}
}

// takeFailure returns, once, the first refusal of a change of path not reported yet.
func (j *journalOwner) takeFailure(path string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.failures[path]
	delete(j.failures, path)
	return err
}

// gone records that the file numbered ino (provisional or the owner's) loses its last name
// here: the owner may give its number to another file, which must not alias to it.
func (j *journalOwner) gone(ino uint64) {
	if ino >= localInoBase {
		j.mu.Lock()
		j.dead[ino] = true
		j.mu.Unlock()
		return
	}
	r := j.r
	r.aliasMu.Lock()
	delete(r.aliases, ino)
	r.aliasMu.Unlock()
}

// learnEntry takes the owner's entry for a name made here (provisionally numbered local, or
// 0 for a new name of a known file).
func (j *journalOwner) learnEntry(p string, local uint64) func([]byte) {
	return func(body []byte) {
		var e wire.Entry
		if err := e.Decode(body); err != nil {
			return
		}
		if local >= localInoBase {
			j.mu.Lock()
			dead := j.dead[local]
			delete(j.dead, local)
			j.mu.Unlock()
			if dead {
				return
			}
			j.r.aliasIno(e.Ino, local)
		}
		j.learn(p, &e)
	}
}

// learnChange takes the owner's entry after a WRITE or SETATTR.
func (j *journalOwner) learnChange(p string) func([]byte) {
	return func(body []byte) {
		var resp wire.ChangeResp
		if err := resp.Decode(body); err == nil {
			j.learn(p, &resp.Entry)
		}
	}
}

// learn shows the owner's entry e of p in the replica when nothing else of this mount waits
// to change p and the replica still shows the same file there, and records it as this
// mount's own state of the file.
func (j *journalOwner) learn(p string, e *wire.Entry) {
	j.mu.Lock()
	last := j.pending[p] <= 1
	j.mu.Unlock()
	if n := j.r.node(p); n != nil && e.IsRegular() {
		n.ownVersion(version(e))
		n.wroteState(e)
	}
	if !last {
		return
	}
	cur, ok := j.r.replica.Stat(p)
	if !ok || j.r.kernelIno(cur.Ino) != j.r.kernelIno(e.Ino) || cur.Mode&wire.ModeTypeMask != e.Mode&wire.ModeTypeMask {
		return
	}
	if cur.HasData && cur.Size == e.Size && !e.HasData {
		e.Data, e.HasData = cur.Data, true // what this mount wrote is what the owner holds
	}
	j.r.replica.Put(p, *e)
}

// JournalResult is the outbox's OnResult for the mount's journal (Options.Journal).
func (r *Root) JournalResult(seq uint64, op wire.ApplyOp, res wire.ApplyResult) {
	if r.journal != nil {
		r.journal.result(seq, op, res)
	}
}

// changeAsked counts a change asked of the owner: one round trip, unless the mount journals
// its changes (then the journal counts what it waits for).
func (r *Root) changeAsked() {
	if r.journal == nil {
		r.stats.roundTrips.Add(1)
	}
}

// JournalStatus is what a journaling mount has waiting and what the owner refused.
type JournalStatus struct {
	outbox.Status
	Refused  uint64
	Refusals []Refusal
}

// Journal returns the state of the mount's journal; ok is false for a mount without one.
func (r *Root) Journal() (st JournalStatus, ok bool) {
	j := r.journal
	if j == nil {
		return st, false
	}
	st.Status = j.box.Status()
	j.mu.Lock()
	st.Refused = j.refused
	st.Refusals = append([]Refusal(nil), j.refusals...)
	j.mu.Unlock()
	return st, true
}
