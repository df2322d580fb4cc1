package serve

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/zeebo/blake3"

	"github.com/peerfs/peerfs/internal/bulk"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// The requests that move file contents: listings (with small files inlined), ranges, whole
// files and ranges as push streams, and uploads. They may read or write much and are served
// on goroutines of their own (routes).
//
// GET, per file (get; STREAM is the same without the hash, over the range it asks for):
//
//  1. open through the share (os.Root, regular files only) and fstat it: the state the
//     send is checked against at the end;
//  2. a hash remembered for that state (hashes.go) spares hashing; otherwise the bytes
//     before a resumed offset are hashed first;
//  3. the head (the file's Entry) leaves with the receiver's window;
//  4. bulk.Send: one goroutine reads (and hashes) up to four chunks ahead into the link's
//     chunk buffers, this one sends them as DATA within the credit;
//  5. the file must still be the one opened, unchanged (sameFile), else the exchange ends
//     with CHANGED;
//  6. END carries the size and the BLAKE3 hash, which is remembered.
//
// PUT (put): the part file is opened (resumed from its length and rehashed), its room
// reserved, DATA written at its offsets and hashed (bulk.Receive); at END the size and hash
// must match the sender's, then the part is synced, renamed into place and its directory
// synced before the reply. A part left by a sender that went away stays for a resumed PUT.

func (h *Handler) readDir(r *rpc.Request, sh *share.Share, req *wire.ReadDirReq) {
	h.sendListing(r, sh, req)
}

// list is READDIR whose replies wait for the opener's credit: a listing of any length then
// never queues more than the opener's window on its side of the link.
func (h *Handler) list(r *rpc.Request, sh *share.Share, req *wire.ListReq) {
	r.Pace(req.Window)
	h.sendListing(r, sh, &req.ReadDirReq)
}

// sendListing answers READDIR or LIST: the entries of a directory in frames of about
// frameCut bytes.
func (h *Handler) sendListing(r *rpc.Request, sh *share.Share, req *wire.ReadDirReq) {
	list, err := sh.ReadDirInline(req.Path, int(req.InlineMax))
	if err != nil {
		h.fail(r, err)
		return
	}
	// Cut the listing into frames of about frameCut bytes: count, then entries.
	var batch []byte
	count := 0
	flush := func(last bool) error {
		body := make([]byte, 4, 4+len(batch))
		body[0], body[1], body[2], body[3] = byte(count>>24), byte(count>>16), byte(count>>8), byte(count)
		body = append(body, batch...)
		batch, count = batch[:0], 0
		if last {
			return r.Reply(body)
		}
		return r.ReplyMore(body)
	}
	for i := range list {
		batch = list[i].AppendTo(batch)
		count++
		if len(batch) >= frameCut {
			if err := flush(false); err != nil {
				return
			}
		}
	}
	flush(true)
}

// openRead opens path on sh for reading; on failure it has answered and f is nil.
func (h *Handler) openRead(r *rpc.Request, sh *share.Share, path string) (f *os.File, e wire.Entry) {
	f, e, err := sh.OpenRead(path)
	if err != nil {
		h.fail(r, err)
		return nil, e
	}
	return f, e
}

func (h *Handler) read(r *rpc.Request, sh *share.Share, req *wire.ReadReq) {
	f, _ := h.openRead(r, sh, req.Path)
	if f == nil {
		return
	}
	defer f.Close()
	buf := rpc.GetBuffer(int(req.Length))
	n, err := share.ReadAt(f, buf.Payload(), req.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		buf.Release()
		h.fail(r, err)
		return
	}
	buf.B = buf.B[:wire.HeaderLen+n]
	r.ReplyBuffer(buf)
}

// get streams a file: a reader goroutine reads (and hashes) chunks ahead while this
// goroutine encrypts and sends them within the receiver's credit. The hash of a file sent
// whole before and unchanged since is not computed again (hashes.go).
func (h *Handler) get(r *rpc.Request, sh *share.Share, req *wire.GetReq) {
	f, e := h.openRead(r, sh, req.Path)
	if f == nil {
		return
	}
	defer f.Close()
	if req.Offset > e.Size {
		r.Fail(wire.EINVAL, "offset beyond the end of the file")
		return
	}
	start := time.Now()
	st, stErr := stateOf(f)
	sum, known := hashes.lookup(st)
	known = known && stErr == nil
	var hw io.Writer // nil: the hash is known
	var hasher *blake3.Hasher
	if !known {
		hasher = blake3.New()
		hw = hasher
		if req.Offset > 0 {
			if _, err := io.CopyBuffer(hasher, io.NewSectionReader(f, 0, int64(req.Offset)), make([]byte, 1<<20)); err != nil {
				h.fail(r, err)
				return
			}
		}
	}
	out, err := r.Push(e.AppendTo(nil), req.Window)
	if err != nil {
		return
	}
	still := func() bool { return sameFile(sh, req.Path, f, &e, st, stErr) }
	if !h.sendRange(r, out, f, req.Offset, e.Size, hw, still, "the file changed on its owner while it was being sent: pull again") {
		return
	}
	if hasher != nil {
		hasher.Sum(sum[:0])
		if stErr == nil {
			hashes.remember(st, sum, start)
		}
	}
	end := wire.StreamEnd{Size: e.Size, Hash: sum}
	out.End(end.AppendTo(nil))
}

// sendRange pushes bytes [from, to) of f on out (bulk.Send), hashing them into hw unless it is
// nil, and then asks still, unless it is nil, whether f is still the file it was. It reports
// whether all went well; if not, it has answered (ErrnoChanged with the text changed for a
// file that shrank or changed, the share's error for a failed read), unless the receiver
// cancelled or the link is gone.
func (h *Handler) sendRange(r *rpc.Request, out *rpc.OutStream, f *os.File, from, to uint64, hw io.Writer, still func() bool, changed string) bool {
	err := bulk.Send(r.Context(), out, f, from, to, hw, nil)
	var rerr *bulk.ReadError
	switch {
	case err != nil && !errors.As(err, &rerr):
		return false // cancelled by the receiver or the link is gone
	case err == nil && still != nil && !still():
		err = bulk.ErrShrank
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, bulk.ErrShrank):
		r.Fail(wire.ErrnoChanged, changed)
	default:
		h.fail(r, err)
	}
	return false
}

// sameFile reports whether the file sent, f, still has the state it had when the send began
// (st, or e where the state could not be read) and is still the file at path (a final
// symlink followed, as the open did).
func sameFile(sh *share.Share, path string, f *os.File, e *wire.Entry, st contentState, stErr error) bool {
	now, err := sh.StatFollow(path)
	if err != nil {
		return false
	}
	if now.Size != e.Size || now.MtimeNs != e.MtimeNs || now.Ino != e.Ino {
		return false
	}
	if stErr != nil {
		return true
	}
	after, err := stateOf(f)
	return err == nil && after == st
}

// stream pushes a range of a file to a mount reading it sequentially: like get, without the
// hash. The receiver usually cancels it when its reader stops.
func (h *Handler) stream(r *rpc.Request, sh *share.Share, req *wire.StreamReq) {
	f, e := h.openRead(r, sh, req.Path)
	if f == nil {
		return
	}
	defer f.Close()
	end := e.Size
	if req.Offset < end && req.Length < end-req.Offset {
		end = req.Offset + req.Length
	}
	out, err := r.Push(e.AppendTo(nil), req.Window)
	if err != nil {
		return
	}
	if req.Offset < end && !h.sendRange(r, out, f, req.Offset, end, nil, nil, "the file got shorter on its owner while it was read: read it again") {
		return
	}
	out.End(nil)
}

// put receives an upload into the part file and commits it once its hash verifies. A part
// interrupted by the link or the sender stays for a resumed PUT; a corrupt one is removed.
func (h *Handler) put(r *rpc.Request, sh *share.Share, req *wire.PutReq) {
	f, offset, err := sh.CreatePart(req.Path, req.Flags&wire.PutResume != 0)
	if err != nil {
		h.fail(r, err)
		return
	}
	defer f.Close()
	hasher := blake3.New()
	if uint64(offset) > req.Size {
		if err := f.Truncate(0); err != nil {
			h.fail(r, err)
			return
		}
		offset = 0
	}
	if offset > 0 {
		if _, err := io.CopyBuffer(hasher, io.NewSectionReader(f, 0, offset), make([]byte, 1<<20)); err != nil {
			h.fail(r, err)
			return
		}
	}
	if err := sh.ReservePart(f, req.Path, offset, req.Size); err != nil {
		h.fail(r, err)
		return
	}
	defer share.ReleasePart(f, req.Size) // what was not filled, unless committed (f closed) first
	head := wire.PutResp{Offset: uint64(offset), Window: rpc.DefaultWindow}
	in, err := r.Accept(head.AppendTo(nil), rpc.DefaultWindow)
	if err != nil {
		return
	}
	defer in.Close()
	pos, err := bulk.Receive(r.Context(), in, f, hasher, uint64(offset), req.Size, nil)
	var ferr *bulk.FileError
	switch {
	case errors.As(err, &ferr):
		h.fail(r, ferr.Err)
		return
	case errors.Is(err, bulk.ErrOrder):
		r.Fail(wire.EINVAL, err.Error())
		return
	case err != nil:
		return // sender gone or cancelled: keep the part for a resumed PUT
	}
	var end wire.StreamEnd
	if err := end.Decode(in.End()); err != nil {
		r.Fail(wire.ErrnoProtocol, err.Error())
		return
	}
	var sum [wire.HashLen]byte
	hasher.Sum(sum[:0])
	if end.Size != pos || pos != req.Size || sum != end.Hash {
		f.Close()
		sh.RemovePart(req.Path)
		r.Fail(wire.ErrnoHashMismatch, "upload did not verify (size or BLAKE3 hash differs): send again")
		return
	}
	if err := share.SyncClose(f); err != nil {
		h.fail(r, err)
		return
	}
	if err := sh.CommitPart(req.Path, req.Mode, time.Unix(0, req.MtimeNs)); err != nil {
		h.fail(r, err)
		return
	}
	r.ReplyEnd(end.AppendTo(nil))
}
