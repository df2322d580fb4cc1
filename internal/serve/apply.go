package serve

import (
	"errors"
	"io/fs"
	"time"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// APPLY (PROTOCOL.md): a batch of a mount's journal of changes, applied in the journal's
// order, each op once, with the same functions that serve each change alone (meta.go):
//
//  1. decode and check every op (its op, flags and body, its share the APPLY's) before any
//     is applied: a bad one fails the whole batch (PROTOCOL), nothing applied;
//  2. wait, up to gapWait, for the journal's earlier batches (First - 1 applied);
//  3. under the journal's lock, op by op: one at or below Applied is answered empty; one with
//     a Base whose file changed on the owner is a CONFLICT; else it is applied and Applied,
//     in memory and in the journal's record (journal.go), moves past it, whatever its result;
//  4. stop early at the reply's budget or the deadline; with SYNC, make it all durable.

// changes decode the body of each op an APPLY may carry, and apply it with the function that
// serves its request alone.
var changes = [256]func([]byte) (body, func(*share.Share) ([]byte, error), error){
	wire.OpMkdir:       change(mkdir),
	wire.OpSymlink:     change(symlink),
	wire.OpSetAttr:     change(setAttr),
	wire.OpCreate:      change(create),
	wire.OpWrite:       change(write),
	wire.OpUnlink:      change(unlink),
	wire.OpRmdir:       change(rmdir),
	wire.OpRename:      change(rename),
	wire.OpLink:        change(link),
	wire.OpSetXattr:    change(setXattr),
	wire.OpRemoveXattr: change(removeXattr),
	wire.OpFallocate:   change(fallocate),
	wire.OpMknod:       change(mknod),
}

// change decodes the body of a change and binds it to the function that applies it.
func change[M any, P interface {
	*M
	body
}](apply func(*share.Share, P) ([]byte, error)) func([]byte) (body, func(*share.Share) ([]byte, error), error) {
	return func(b []byte) (body, func(*share.Share) ([]byte, error), error) {
		m := P(new(M))
		err := m.Decode(b)
		return m, func(sh *share.Share) ([]byte, error) { return apply(sh, m) }, err
	}
}

// journalOp is one op of an APPLY, decoded.
type journalOp struct {
	wire.ApplyOp
	path  string // the op's file: its Path, RENAME's and LINK's To
	from  string // RENAME's and LINK's From
	apply func(*share.Share) ([]byte, error)
	// refused: the body names a path the owner refuses; the op fails with it, as its
	// request alone would, and the journal goes on.
	refused error
}

// replyBudget bounds an APPLY reply's encoding, safely under the frame limit: an op is applied
// only while its result, of at most maxResult bytes, still fits.
const (
	replyBudget = wire.MaxFrameLen - 64<<10
	maxResult   = 16 << 10
)

// apply serves APPLY.
func (h *Handler) apply(r *rpc.Request) {
	var req wire.ApplyReq
	sh := h.decode(r, &req)
	if sh == nil {
		return
	}
	if sh.ReadOnly() {
		r.Fail(wire.EROFS, "share "+sh.Name()+" is read-only: ask its owner to share it writable with you")
		return
	}
	if h.Journals == nil {
		r.Fail(wire.ErrnoUnsupported, "this owner keeps no journals: send each change as its own request")
		return
	}
	ops := make([]journalOp, len(req.Ops))
	for i, op := range req.Ops {
		decode := changes[op.Op]
		if decode == nil { // wire.Applicable and changes disagree
			r.Fail(wire.ErrnoProtocol, "op "+op.Op.String()+" cannot be applied from a journal")
			return
		}
		m, apply, err := decode(op.Body)
		switch {
		case err != nil && !errors.Is(err, wire.ErrPathRefused):
			r.Fail(wire.ErrnoProtocol, "op "+op.Op.String()+" of the batch: "+err.Error())
			return
		case shareOf(m) != req.Share:
			r.Fail(wire.ErrnoProtocol, "op "+op.Op.String()+" of the batch names another share than the APPLY")
			return
		}
		ops[i] = journalOp{ApplyOp: op, apply: apply, refused: err}
		ops[i].path, ops[i].from = targetsOf(m)
	}
	j, err := h.Journals.journal(req.Share, req.Journal)
	if err != nil {
		r.Fail(wire.EIO, "the owner's record of this journal is damaged: its owner's log names the file to repair")
		return
	}
	resp, err := h.Journals.apply(r, sh, j, &req, ops)
	var rerr *recordError
	switch {
	case errors.As(err, &rerr):
		r.Fail(wire.EIO, "the owner cannot write its record of this journal: its log says why")
		return
	case err != nil:
		h.fail(r, err)
		return
	}
	r.Reply(resp.AppendTo(nil))
}

// apply applies ops (the batch req) to sh in the journal's order and answers them.
func (s *JournalStore) apply(r *rpc.Request, sh *share.Share, j *journal, req *wire.ApplyReq, ops []journalOp) (*wire.ApplyResp, error) {
	resp := &wire.ApplyResp{}
	if !j.waitFor(r.Context(), req.First-1, s.gapWait) {
		resp.Applied, resp.Durable = j.marks()
		return resp, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	start := time.Now()
	size := 8 + 8 + 4
	for i := range ops {
		seq := req.First + uint64(i)
		applied, _ := j.marks()
		if seq <= applied {
			resp.Results = append(resp.Results, wire.ApplyResult{})
			size += 8
			continue
		}
		if size+maxResult > replyBudget || time.Since(start) > s.deadline {
			break
		}
		if j.dirty { // the record of the op before failed: apply none until it holds
			if err := j.record(); err != nil {
				s.log.Error("cannot write the record of a journal: its ops wait", "file", j.path, "err", err)
				if len(resp.Results) == 0 {
					return nil, err
				}
				break
			}
		}
		res := j.applyOne(sh, &ops[i])
		resp.Results = append(resp.Results, res)
		size += 8 + len(res.Body)
		if err := j.advance(seq); err != nil {
			s.log.Error("cannot write the record of a journal: it applies no more ops until it can", "file", j.path, "err", err)
			break
		}
	}
	if req.Flags&wire.ApplySync != 0 {
		if err := j.sync(sh); err != nil {
			s.log.Error("cannot make a journal's changes durable", "share", sh.Name(), "journal", req.Journal, "err", err)
			return nil, err
		}
	}
	resp.Applied, resp.Durable = j.marks()
	return resp, nil
}

// applyOne applies one op whose turn it is, unless its file changed on the owner since its
// Base (a conflict); mu held.
func (j *journal) applyOne(sh *share.Share, op *journalOp) wire.ApplyResult {
	if op.refused != nil {
		return failed(op.refused)
	}
	if op.Flags&wire.ApplyHasBase != 0 {
		e, err := sh.Stat(op.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return wire.ApplyResult{Code: wire.ErrnoConflict}
		case err != nil:
			return failed(err)
		}
		if now := e.State(); now != op.Base {
			if left, ok := j.states.get(op.path); !ok || now != left {
				return wire.ApplyResult{Code: wire.ErrnoConflict, Body: e.AppendTo(nil)}
			}
		}
	}
	body, err := op.apply(sh)
	if err != nil {
		return failed(err)
	}
	j.remember(sh, op, body)
	return wire.ApplyResult{Body: body}
}

// remember notes the states an applied op left its files in (fileStates), from its reply
// where it has the file's Entry, else from a stat; mu held.
func (j *journal) remember(sh *share.Share, op *journalOp, reply []byte) {
	statNow := func(p string) {
		if e, err := sh.Stat(p); err == nil {
			j.states.set(p, e.State())
		} else {
			j.states.drop(p)
		}
	}
	j.touch(op.path)
	switch op.Op {
	case wire.OpUnlink, wire.OpRmdir:
		j.states.drop(op.path)
	case wire.OpRename:
		j.touch(op.from)
		j.states.move(op.from, op.path)
		statNow(op.path) // a rename changes the file's ctime
		statNow(parentOf(op.from))
	case wire.OpSetAttr, wire.OpWrite:
		var c wire.ChangeResp
		if c.Decode(reply) == nil {
			j.states.set(op.path, c.Entry.State())
		} else {
			statNow(op.path)
		}
	case wire.OpSetXattr, wire.OpRemoveXattr:
		statNow(op.path)
	default: // the ops that answer the file's Entry
		var e wire.Entry
		if e.Decode(reply) == nil {
			j.states.set(op.path, e.State())
			if op.Op == wire.OpLink {
				j.states.set(op.from, e.State()) // the same file
			}
		} else {
			statNow(op.path)
		}
	}
	switch op.Op {
	case wire.OpMkdir, wire.OpSymlink, wire.OpCreate, wire.OpUnlink, wire.OpRmdir, wire.OpRename, wire.OpLink, wire.OpMknod:
		statNow(parentOf(op.path)) // a change of names changes the directory's times
	}
}

// failed is the result of an op that failed as its request alone would have.
func failed(err error) wire.ApplyResult {
	return wire.ApplyResult{Code: share.Errno(err), Body: []byte(share.Message(err))}
}

// targetsOf is the file a change concerns (path) and, for RENAME and LINK, the other name.
func targetsOf(m body) (path, from string) {
	switch m := m.(type) {
	case *wire.MkdirReq:
		return m.Path, ""
	case *wire.SymlinkReq:
		return m.Path, ""
	case *wire.SetAttrReq:
		return m.Path, ""
	case *wire.CreateReq:
		return m.Path, ""
	case *writeReq:
		return m.Path, ""
	case *wire.PathReq:
		return m.Path, ""
	case *wire.RenameReq:
		return m.To, m.From
	case *wire.LinkReq:
		return m.To, m.From
	case *wire.XattrReq:
		return m.Path, ""
	case *wire.FallocateReq:
		return m.Path, ""
	case *wire.MknodReq:
		return m.Path, ""
	}
	return "", ""
}
