package share

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/zeebo/blake3"

	"github.com/peerfs/peerfs/internal/bulk"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// Server answers one peer's requests on one link. It sees only the shares Lookup returns for
// that peer, so a share not exported to the peer does not exist for it.
type Server struct {
	// Lookup returns the share of that name if it is exported to this peer.
	Lookup func(name string) (*Share, bool)
	// List returns the shares exported to this peer.
	List   func() []wire.ShareInfo
	Logger *slog.Logger
}

// readdirBatch is the encoded size at which a READDIR reply frame is cut: large enough that a
// directory of thousands of entries takes few frames, small enough to stream.
const readdirBatch = 256 << 10

// inlineWrite is the largest WRITE served on the link's read loop (Inline): a small file's
// contents. Larger ones arrive many at a time from a flush and are served in parallel.
const inlineWrite = 64 << 10

// Inline implements rpc.Inliner: metadata operations and small writes are quick local
// system calls with small replies. READDIR, READ and the streams may read much from the disk
// and are served in goroutines, as FSYNC and FALLOCATE, which may wait for the disk.
func (sv *Server) Inline(op wire.Op, size int) bool {
	switch op {
	case wire.OpShares, wire.OpStat, wire.OpStatfs, wire.OpMkdir, wire.OpSymlink,
		wire.OpLink, wire.OpUnlink, wire.OpRmdir, wire.OpRename, wire.OpSetAttr,
		wire.OpGetXattr, wire.OpListXattr, wire.OpSetXattr, wire.OpRemoveXattr, wire.OpMknod:
		return true
	case wire.OpWrite, wire.OpCreate: // a CREATE may carry a file's first data
		return size <= inlineWrite+wire.MaxPathLen+64
	}
	return false
}

// ServeRequest implements rpc.Handler.
func (sv *Server) ServeRequest(r *rpc.Request) {
	switch r.Op {
	case wire.OpShares:
		m := wire.Shares{List: sv.List()}
		r.Reply(m.AppendTo(nil))
	case wire.OpStat:
		var req wire.PathReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.stat(r, sh, &req)
		}
	case wire.OpReadDir:
		var req wire.ReadDirReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.readDir(r, sh, &req)
		}
	case wire.OpRead:
		var req wire.ReadReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.read(r, sh, &req)
		}
	case wire.OpGet:
		var req wire.GetReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.get(r, sh, &req)
		}
	case wire.OpStream:
		var req wire.StreamReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.stream(r, sh, &req)
		}
	case wire.OpStatfs:
		var req wire.ShareReq
		if sh := sv.decode(r, &req); sh != nil {
			st, err := sh.Statfs()
			sv.replyMsg(r, &st, err)
		}
	case wire.OpGetXattr:
		var req wire.XattrReq
		if sh := sv.decode(r, &req); sh != nil {
			v, err := sh.GetXattr(req.Path, req.Name)
			if err != nil {
				sv.fail(r, err)
				return
			}
			r.Reply(v)
		}
	case wire.OpListXattr:
		var req wire.PathReq
		if sh := sv.decode(r, &req); sh != nil {
			names, err := sh.ListXattr(req.Path)
			sv.replyMsg(r, &wire.XattrNames{Names: names}, err)
		}
	case wire.OpWatch:
		var req wire.ShareReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.watch(r, sh)
		}
	case wire.OpPut:
		var req wire.PutReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.put(r, sh, &req)
		}
	case wire.OpMkdir:
		var req wire.MkdirReq
		if sh := sv.decode(r, &req); sh != nil {
			// The new directory's Entry spares the mount a STAT after it.
			e, err := wire.Entry{}, sh.Mkdir(req.Path, req.Mode, req.Flags)
			if err == nil {
				e, err = sh.Stat(req.Path)
			}
			sv.replyMsg(r, &e, err)
		}
	case wire.OpSymlink:
		var req wire.SymlinkReq
		if sh := sv.decode(r, &req); sh != nil {
			e, err := wire.Entry{}, sh.Symlink(req.Path, req.Target, req.Flags)
			if err == nil {
				e, err = sh.Stat(req.Path)
			}
			sv.replyMsg(r, &e, err)
		}
	case wire.OpSetAttr:
		var req wire.SetAttrReq
		if sh := sv.decode(r, &req); sh != nil {
			resp, err := sh.SetAttr(req)
			sv.replyMsg(r, &resp, err)
		}
	case wire.OpCreate:
		var req wire.CreateReq
		if sh := sv.decode(r, &req); sh != nil {
			e, err := sh.CreateWith(req)
			sv.replyMsg(r, &e, err)
		}
	case wire.OpWrite:
		var req writeReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.write(r, sh, &req)
		}
	case wire.OpUnlink:
		var req wire.PathReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.Unlink(req.Path))
		}
	case wire.OpRmdir:
		var req wire.PathReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.Rmdir(req.Path))
		}
	case wire.OpRename:
		var req wire.RenameReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.Rename(req.From, req.To, req.Flags))
		}
	case wire.OpLink:
		var req wire.LinkReq
		if sh := sv.decode(r, &req); sh != nil {
			e, err := sh.Link(req.From, req.To)
			sv.replyMsg(r, &e, err)
		}
	case wire.OpSetXattr:
		var req wire.XattrReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.SetXattr(req.Path, req.Name, req.Value, req.Flags))
		}
	case wire.OpRemoveXattr:
		var req wire.XattrReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.RemoveXattr(req.Path, req.Name))
		}
	case wire.OpFallocate:
		var req wire.FallocateReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.fallocate(r, sh, &req)
		}
	case wire.OpFsync:
		var req wire.FsyncReq
		if sh := sv.decode(r, &req); sh != nil {
			sv.reply(r, sh.Fsync(req.Path, req.DataOnly))
		}
	case wire.OpMknod:
		var req wire.MknodReq
		if sh := sv.decode(r, &req); sh != nil {
			e, err := sh.Mknod(req.Path, req.Mode, req.Rdev)
			sv.replyMsg(r, &e, err)
		}
	default:
		r.Fail(wire.ErrnoUnsupported, "request "+r.Op.String()+" is not supported by this peer")
	}
}

type decodable interface{ Decode([]byte) error }

// writeReq is a WRITE body: the head and the bytes after it, which alias the request payload
// and so are valid only until ServeRequest returns.
type writeReq struct {
	wire.WriteReq
	data []byte
}

func (m *writeReq) Decode(b []byte) error {
	data, err := m.WriteReq.Decode(b)
	m.data = data
	return err
}

// decode parses the request body into m and resolves the share it names; on failure it has
// already answered with ERROR and returns nil.
func (sv *Server) decode(r *rpc.Request, m decodable) *Share {
	if err := m.Decode(r.Payload()); err != nil {
		code := wire.ErrnoProtocol
		if errors.Is(err, wire.ErrPathRefused) {
			code = wire.ErrnoPathRefused
		}
		r.Fail(code, err.Error())
		return nil
	}
	name := shareOf(m)
	sh, ok := sv.Lookup(name)
	if !ok {
		r.Fail(wire.ErrnoNoShare, "no share named "+name+" is shared with you: ask its owner to run \"peerfs share add\" with --peer for you")
		return nil
	}
	return sh
}

func shareOf(m decodable) string {
	switch m := m.(type) {
	case *wire.PathReq:
		return m.Share
	case *wire.ReadDirReq:
		return m.Share
	case *wire.ReadReq:
		return m.Share
	case *wire.GetReq:
		return m.Share
	case *wire.StreamReq:
		return m.Share
	case *wire.PutReq:
		return m.Share
	case *wire.MkdirReq:
		return m.Share
	case *wire.SymlinkReq:
		return m.Share
	case *wire.SetAttrReq:
		return m.Share
	case *wire.ShareReq:
		return m.Share
	case *wire.XattrReq:
		return m.Share
	case *wire.CreateReq:
		return m.Share
	case *writeReq:
		return m.Share
	case *wire.RenameReq:
		return m.Share
	case *wire.LinkReq:
		return m.Share
	case *wire.FallocateReq:
		return m.Share
	case *wire.FsyncReq:
		return m.Share
	case *wire.MknodReq:
		return m.Share
	}
	return ""
}

func (sv *Server) fail(r *rpc.Request, err error) {
	r.Fail(Errno(err), Message(err))
}

func (sv *Server) reply(r *rpc.Request, err error) {
	if err != nil {
		sv.fail(r, err)
		return
	}
	r.Reply(nil)
}

// replyMsg answers with m, or with the error.
func (sv *Server) replyMsg(r *rpc.Request, m interface{ AppendTo([]byte) []byte }, err error) {
	if err != nil {
		sv.fail(r, err)
		return
	}
	r.Reply(m.AppendTo(nil))
}

// write writes the bytes of a WRITE straight from the request payload. Offsets travel as
// uint64; one of 2^63 or more becomes negative here and is refused (EINVAL) as pwrite(2) refuses
// it, after the read-only check.
func (sv *Server) write(r *rpc.Request, sh *Share, req *writeReq) {
	resp, err := sh.Write(req.Path, int64(req.Offset), req.data)
	sv.replyMsg(r, &resp, err)
}

// fallocate converts the range as write does.
func (sv *Server) fallocate(r *rpc.Request, sh *Share, req *wire.FallocateReq) {
	e, err := sh.Fallocate(req.Path, req.Mode, int64(req.Offset), int64(req.Length))
	sv.replyMsg(r, &e, err)
}

func (sv *Server) stat(r *rpc.Request, sh *Share, req *wire.PathReq) {
	e, err := sh.Stat(req.Path)
	if err != nil {
		sv.fail(r, err)
		return
	}
	r.Reply(e.AppendTo(nil))
}

func (sv *Server) readDir(r *rpc.Request, sh *Share, req *wire.ReadDirReq) {
	list, err := sh.ReadDirInline(req.Path, int(req.InlineMax))
	if err != nil {
		sv.fail(r, err)
		return
	}
	// Cut the listing into frames of about readdirBatch bytes: count, then entries.
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
		if len(batch) >= readdirBatch {
			if err := flush(false); err != nil {
				return
			}
		}
	}
	flush(true)
}

func (sv *Server) read(r *rpc.Request, sh *Share, req *wire.ReadReq) {
	f, _, err := sh.OpenRead(req.Path)
	if err != nil {
		sv.fail(r, err)
		return
	}
	defer f.Close()
	buf := rpc.GetBuffer(int(req.Length))
	n, err := readAt(f, buf.Payload(), req.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		buf.Release()
		sv.fail(r, err)
		return
	}
	buf.B = buf.B[:wire.HeaderLen+n]
	r.ReplyBuffer(buf)
}

// get streams a file: a reader goroutine reads (and hashes) chunks ahead while this
// goroutine encrypts and sends them within the receiver's credit. The hash of a file sent
// whole before and unchanged since is not computed again (hashes.go).
func (sv *Server) get(r *rpc.Request, sh *Share, req *wire.GetReq) {
	f, e, err := sh.OpenRead(req.Path)
	if err != nil {
		sv.fail(r, err)
		return
	}
	defer f.Close()
	if req.Offset > e.Size {
		r.Fail(wire.EINVAL, "offset beyond the end of the file")
		return
	}
	start := time.Now()
	st, stErr := stateOf(f)
	sum, known := sh.hashes.lookup(st)
	known = known && stErr == nil
	var h *blake3.Hasher
	if !known {
		h = blake3.New()
		if req.Offset > 0 {
			if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, int64(req.Offset)), make([]byte, 1<<20)); err != nil {
				sv.fail(r, err)
				return
			}
		}
	}
	out, err := r.Push(e.AppendTo(nil), req.Window)
	if err != nil {
		return
	}
	var hw io.Writer
	if h != nil {
		hw = h
	}
	err = bulk.Send(r.Context(), out, f, req.Offset, e.Size, hw, nil)
	var rerr *bulk.ReadError
	if err != nil && !errors.As(err, &rerr) {
		return // cancelled by the receiver or the link is gone
	}
	if err == nil && !sameFile(sh, req.Path, f, &e, st, stErr) {
		err = bulk.ErrShrank
	}
	if err != nil {
		if errors.Is(err, bulk.ErrShrank) {
			r.Fail(wire.ErrnoChanged, "the file changed on its owner while it was being sent: pull again")
		} else {
			sv.fail(r, err)
		}
		return
	}
	if h != nil {
		h.Sum(sum[:0])
		if stErr == nil {
			sh.hashes.remember(st, sum, start)
		}
	}
	end := wire.StreamEnd{Size: e.Size, Hash: sum}
	out.End(end.AppendTo(nil))
}

// sameFile reports whether the file sent, f, still has the state it had when the send began
// (st, or e where the state could not be read) and is still the file at path (a final
// symlink followed, as the open did).
func sameFile(sh *Share, path string, f *os.File, e *wire.Entry, st contentState, stErr error) bool {
	fi, err := sh.root.Stat(rootName(path))
	if err != nil {
		return false
	}
	if now := entryFromInfo(fi); now.Size != e.Size || now.MtimeNs != e.MtimeNs || now.Ino != e.Ino {
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
func (sv *Server) stream(r *rpc.Request, sh *Share, req *wire.StreamReq) {
	f, e, err := sh.OpenRead(req.Path)
	if err != nil {
		sv.fail(r, err)
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
	if req.Offset < end {
		err := bulk.Send(r.Context(), out, f, req.Offset, end, nil, nil)
		var rerr *bulk.ReadError
		if err != nil && !errors.As(err, &rerr) {
			return // cancelled by the receiver or the link is gone
		}
		if err != nil {
			if errors.Is(err, bulk.ErrShrank) {
				r.Fail(wire.ErrnoChanged, "the file got shorter on its owner while it was read: read it again")
			} else {
				sv.fail(r, err)
			}
			return
		}
	}
	out.End(nil)
}

// put receives an upload into the part file and commits it once its hash verifies. A part
// interrupted by the link or the sender stays for a resumed PUT; a corrupt one is removed.
func (sv *Server) put(r *rpc.Request, sh *Share, req *wire.PutReq) {
	f, offset, err := sh.CreatePart(req.Path, req.Flags&wire.PutResume != 0)
	if err != nil {
		sv.fail(r, err)
		return
	}
	defer f.Close()
	h := blake3.New()
	if uint64(offset) > req.Size {
		if err := f.Truncate(0); err != nil {
			sv.fail(r, err)
			return
		}
		offset = 0
	}
	if offset > 0 {
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, offset), make([]byte, 1<<20)); err != nil {
			sv.fail(r, err)
			return
		}
	}
	if err := sh.ReservePart(f, req.Path, offset, req.Size); err != nil {
		sv.fail(r, err)
		return
	}
	defer ReleasePart(f, req.Size) // what was not filled, unless committed (f closed) first
	head := wire.PutResp{Offset: uint64(offset), Window: rpc.DefaultWindow}
	in, err := r.Accept(head.AppendTo(nil), rpc.DefaultWindow)
	if err != nil {
		return
	}
	defer in.Close()
	pos, err := bulk.Receive(r.Context(), in, f, h, uint64(offset), req.Size, nil)
	var ferr *bulk.FileError
	switch {
	case errors.As(err, &ferr):
		sv.fail(r, ferr.Err)
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
	h.Sum(sum[:0])
	if end.Size != pos || pos != req.Size || sum != end.Hash {
		f.Close()
		sh.RemovePart(req.Path)
		r.Fail(wire.ErrnoHashMismatch, "upload did not verify (size or BLAKE3 hash differs): send again")
		return
	}
	if err := SyncClose(f); err != nil {
		sv.fail(r, err)
		return
	}
	if err := sh.CommitPart(req.Path, req.Mode, time.Unix(0, req.MtimeNs)); err != nil {
		sv.fail(r, err)
		return
	}
	r.ReplyEnd(end.AppendTo(nil))
}
