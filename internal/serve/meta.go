package serve

import (
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// The requests about names, attributes and in-place changes: each is one call of the share
// and a small reply, served on the link's read loop but for FALLOCATE and FSYNC (routes).

func (h *Handler) shares(r *rpc.Request) {
	m := wire.Shares{List: h.List()}
	r.Reply(m.AppendTo(nil))
}

func (h *Handler) stat(r *rpc.Request, sh *share.Share, req *wire.PathReq) {
	e, err := sh.Stat(req.Path)
	h.replyMsg(r, &e, err)
}

func (h *Handler) statfs(r *rpc.Request, sh *share.Share, _ *wire.ShareReq) {
	st, err := sh.Statfs()
	h.replyMsg(r, &st, err)
}

func (h *Handler) getXattr(r *rpc.Request, sh *share.Share, req *wire.XattrReq) {
	v, err := sh.GetXattr(req.Path, req.Name)
	if err != nil {
		h.fail(r, err)
		return
	}
	r.Reply(v)
}

func (h *Handler) listXattr(r *rpc.Request, sh *share.Share, req *wire.PathReq) {
	names, err := sh.ListXattr(req.Path)
	h.replyMsg(r, &wire.XattrNames{Names: names}, err)
}

// mkdir answers with the new directory's Entry, which spares the mount a STAT after it.
func (h *Handler) mkdir(r *rpc.Request, sh *share.Share, req *wire.MkdirReq) {
	e, err := wire.Entry{}, sh.Mkdir(req.Path, req.Mode, req.Flags)
	if err == nil {
		e, err = sh.Stat(req.Path)
	}
	h.replyMsg(r, &e, err)
}

// symlink answers with the new link's Entry, as mkdir does.
func (h *Handler) symlink(r *rpc.Request, sh *share.Share, req *wire.SymlinkReq) {
	e, err := wire.Entry{}, sh.Symlink(req.Path, req.Target, req.Flags)
	if err == nil {
		e, err = sh.Stat(req.Path)
	}
	h.replyMsg(r, &e, err)
}

func (h *Handler) setAttr(r *rpc.Request, sh *share.Share, req *wire.SetAttrReq) {
	resp, err := sh.SetAttr(*req)
	h.replyMsg(r, &resp, err)
}

func (h *Handler) create(r *rpc.Request, sh *share.Share, req *wire.CreateReq) {
	e, err := sh.CreateWith(*req)
	h.replyMsg(r, &e, err)
}

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

// write writes the bytes of a WRITE straight from the request payload. Offsets travel as
// uint64; one of 2^63 or more becomes negative here and is refused (EINVAL) as pwrite(2) refuses
// it, after the read-only check.
func (h *Handler) write(r *rpc.Request, sh *share.Share, req *writeReq) {
	resp, err := sh.Write(req.Path, int64(req.Offset), req.data)
	h.replyMsg(r, &resp, err)
}

func (h *Handler) unlink(r *rpc.Request, sh *share.Share, req *wire.PathReq) {
	h.reply(r, sh.Unlink(req.Path))
}

func (h *Handler) rmdir(r *rpc.Request, sh *share.Share, req *wire.PathReq) {
	h.reply(r, sh.Rmdir(req.Path))
}

func (h *Handler) rename(r *rpc.Request, sh *share.Share, req *wire.RenameReq) {
	h.reply(r, sh.Rename(req.From, req.To, req.Flags))
}

func (h *Handler) link(r *rpc.Request, sh *share.Share, req *wire.LinkReq) {
	e, err := sh.Link(req.From, req.To)
	h.replyMsg(r, &e, err)
}

func (h *Handler) setXattr(r *rpc.Request, sh *share.Share, req *wire.XattrReq) {
	h.reply(r, sh.SetXattr(req.Path, req.Name, req.Value, req.Flags))
}

func (h *Handler) removeXattr(r *rpc.Request, sh *share.Share, req *wire.XattrReq) {
	h.reply(r, sh.RemoveXattr(req.Path, req.Name))
}

// fallocate converts the range as write does.
func (h *Handler) fallocate(r *rpc.Request, sh *share.Share, req *wire.FallocateReq) {
	e, err := sh.Fallocate(req.Path, req.Mode, int64(req.Offset), int64(req.Length))
	h.replyMsg(r, &e, err)
}

func (h *Handler) fsync(r *rpc.Request, sh *share.Share, req *wire.FsyncReq) {
	h.reply(r, sh.Fsync(req.Path, req.DataOnly))
}

func (h *Handler) mknod(r *rpc.Request, sh *share.Share, req *wire.MknodReq) {
	e, err := sh.Mknod(req.Path, req.Mode, req.Rdev)
	h.replyMsg(r, &e, err)
}
