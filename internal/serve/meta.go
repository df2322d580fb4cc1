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

// The changing requests (those wire.Applicable names): each is one function of the share and
// its decoded body that returns the reply body, served alone by its own request (changing
// makes the route) and as one op of a journal by APPLY (apply.go).

// changing makes a route method of a change: it replies with the change's body, or with the
// share's error.
func changing[P body](change func(*share.Share, P) ([]byte, error)) func(*Handler, *rpc.Request, *share.Share, P) {
	return func(h *Handler, r *rpc.Request, sh *share.Share, req P) {
		b, err := change(sh, req)
		if err != nil {
			h.fail(r, err)
			return
		}
		r.Reply(b)
	}
}

// encoded is m's encoding, or err.
func encoded(m interface{ AppendTo([]byte) []byte }, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return m.AppendTo(nil), nil
}

// mkdir answers with the new directory's Entry, which spares the mount a STAT after it.
func mkdir(sh *share.Share, req *wire.MkdirReq) ([]byte, error) {
	if err := sh.Mkdir(req.Path, req.Mode, req.Flags); err != nil {
		return nil, err
	}
	e, err := sh.Stat(req.Path)
	return encoded(&e, err)
}

// symlink answers with the new link's Entry, as mkdir does.
func symlink(sh *share.Share, req *wire.SymlinkReq) ([]byte, error) {
	if err := sh.Symlink(req.Path, req.Target, req.Flags); err != nil {
		return nil, err
	}
	e, err := sh.Stat(req.Path)
	return encoded(&e, err)
}

func setAttr(sh *share.Share, req *wire.SetAttrReq) ([]byte, error) {
	resp, err := sh.SetAttr(*req)
	return encoded(&resp, err)
}

func create(sh *share.Share, req *wire.CreateReq) ([]byte, error) {
	e, err := sh.CreateWith(*req)
	return encoded(&e, err)
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
func write(sh *share.Share, req *writeReq) ([]byte, error) {
	resp, err := sh.Write(req.Path, int64(req.Offset), req.data)
	return encoded(&resp, err)
}

func unlink(sh *share.Share, req *wire.PathReq) ([]byte, error) {
	return nil, sh.Unlink(req.Path)
}

func rmdir(sh *share.Share, req *wire.PathReq) ([]byte, error) {
	return nil, sh.Rmdir(req.Path)
}

func rename(sh *share.Share, req *wire.RenameReq) ([]byte, error) {
	return nil, sh.Rename(req.From, req.To, req.Flags)
}

func link(sh *share.Share, req *wire.LinkReq) ([]byte, error) {
	e, err := sh.Link(req.From, req.To)
	return encoded(&e, err)
}

func setXattr(sh *share.Share, req *wire.XattrReq) ([]byte, error) {
	return nil, sh.SetXattr(req.Path, req.Name, req.Value, req.Flags)
}

func removeXattr(sh *share.Share, req *wire.XattrReq) ([]byte, error) {
	return nil, sh.RemoveXattr(req.Path, req.Name)
}

// fallocate converts the range as write does.
func fallocate(sh *share.Share, req *wire.FallocateReq) ([]byte, error) {
	e, err := sh.Fallocate(req.Path, req.Mode, int64(req.Offset), int64(req.Length))
	return encoded(&e, err)
}

func mknod(sh *share.Share, req *wire.MknodReq) ([]byte, error) {
	e, err := sh.Mknod(req.Path, req.Mode, req.Rdev)
	return encoded(&e, err)
}

func (h *Handler) fsync(r *rpc.Request, sh *share.Share, req *wire.FsyncReq) {
	h.reply(r, sh.Fsync(req.Path, req.DataOnly))
}
