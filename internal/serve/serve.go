// Package serve is the owner's answer to a peer: it reads the requests that arrive on one link
// (an rpc.Session), resolves the share each one names among those exported to that peer, has
// the share (internal/share, the os.Root file system) do the work and sends the reply, or the
// stream: a file's contents (GET, STREAM), an upload (PUT), a share's change events (WATCH).
//
// It is the only package on the owner's side that speaks the wire: share knows nothing of
// sessions or frames. It must not touch a path of a share itself (every name goes through
// share) and must not let an OS error's text reach a peer (share.Message builds the text).
//
// Files: serve.go routes requests (the table), meta.go serves names, attributes and in-place
// changes, files.go contents (listings, ranges, streams, uploads), watch.go the change events,
// hashes.go remembers the hashes of files sent whole, apply.go applies mounts' journals
// (APPLY) and journal.go keeps the owner's record of them (JournalStore).
package serve

import (
	"errors"
	"log/slog"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// Handler answers one peer's requests on one link (an rpc.Handler). It sees only the shares
// Lookup returns for that peer, so a share not exported to the peer does not exist for it.
type Handler struct {
	// Lookup returns the share of that name if it is exported to this peer.
	Lookup func(name string) (*share.Share, bool)
	// List returns the shares exported to this peer.
	List   func() []wire.ShareInfo
	Logger *slog.Logger
	// Journals keeps the journals mounts apply (APPLY); nil answers APPLY UNSUPPORTED, and
	// the mount sends each change alone.
	Journals *JournalStore
}

// inlineWrite is the largest WRITE served on the link's read loop (Inline): a small file's
// contents. Larger ones arrive many at a time from a flush and are served in parallel.
const inlineWrite = 64 << 10

// frameCut is the encoded size at which a READDIR reply or a batch of change events is cut
// into another frame: large enough that a directory of thousands of entries takes few frames,
// well under wire.MaxFrameLen so that one entry or event more never overflows a frame, and
// small enough that a frame leaves without holding up the link's other exchanges.
const frameCut = 256 << 10

// where says on which goroutine a request is served (rpc.Inliner).
type where uint8

const (
	ownGoroutine    where = iota // may read or wait for the disk long: READDIR, READ, streams, FSYNC
	readLoop                     // a quick local system call with a small reply
	readLoopIfSmall              // on the read loop up to inlineWrite bytes of data
)

// route is how one request op is served.
type route struct {
	where where
	serve func(*Handler, *rpc.Request)
}

// routes is every request op this owner answers; an op not here is answered
// ErrnoUnsupported. Each entry decodes the body, resolves the share and calls the method
// named, which replies.
var routes = [256]route{
	wire.OpShares:      {readLoop, (*Handler).shares},
	wire.OpStat:        {readLoop, on((*Handler).stat)},
	wire.OpReadDir:     {ownGoroutine, on((*Handler).readDir)},
	wire.OpList:        {ownGoroutine, on((*Handler).list)},
	wire.OpRead:        {ownGoroutine, on((*Handler).read)},
	wire.OpGet:         {ownGoroutine, on((*Handler).get)},
	wire.OpStream:      {ownGoroutine, on((*Handler).stream)},
	wire.OpStatfs:      {readLoop, on((*Handler).statfs)},
	wire.OpGetXattr:    {readLoop, on((*Handler).getXattr)},
	wire.OpListXattr:   {readLoop, on((*Handler).listXattr)},
	wire.OpWatch:       {ownGoroutine, on((*Handler).watch)},
	wire.OpPut:         {ownGoroutine, on((*Handler).put)},
	wire.OpMkdir:       {readLoop, on(changing(mkdir))},
	wire.OpSymlink:     {readLoop, on(changing(symlink))},
	wire.OpSetAttr:     {readLoop, on(changing(setAttr))},
	wire.OpCreate:      {readLoopIfSmall, on(changing(create))}, // may carry a file's first data
	wire.OpWrite:       {readLoopIfSmall, on(changing(write))},
	wire.OpUnlink:      {readLoop, on(changing(unlink))},
	wire.OpRmdir:       {readLoop, on(changing(rmdir))},
	wire.OpRename:      {readLoop, on(changing(rename))},
	wire.OpLink:        {readLoop, on(changing(link))},
	wire.OpSetXattr:    {readLoop, on(changing(setXattr))},
	wire.OpRemoveXattr: {readLoop, on(changing(removeXattr))},
	wire.OpFallocate:   {ownGoroutine, on(changing(fallocate))}, // may wait for the disk
	wire.OpFsync:       {ownGoroutine, on((*Handler).fsync)},
	wire.OpMknod:       {readLoop, on(changing(mknod))},
	wire.OpApply:       {ownGoroutine, (*Handler).apply}, // waits for earlier batches
}

// Inline implements rpc.Inliner: metadata operations and small writes are quick local
// system calls with small replies and are served on the link's read loop.
func (h *Handler) Inline(op wire.Op, size int) bool {
	switch routes[op].where {
	case readLoop:
		return true
	case readLoopIfSmall:
		return size <= inlineWrite+wire.MaxPathLen+64
	}
	return false
}

// ServeRequest implements rpc.Handler.
func (h *Handler) ServeRequest(r *rpc.Request) {
	if rt := routes[r.Op]; rt.serve != nil {
		rt.serve(h, r)
		return
	}
	r.Fail(wire.ErrnoUnsupported, "request "+r.Op.String()+" is not supported by this peer")
}

// body is a request body: it decodes itself and names the share it is for.
type body interface {
	Decode([]byte) error
}

// on makes a route of a method that serves the decoded body M on its share.
func on[M any, P interface {
	*M
	body
}](serve func(*Handler, *rpc.Request, *share.Share, P)) func(*Handler, *rpc.Request) {
	return func(h *Handler, r *rpc.Request) {
		var m M
		if sh := h.decode(r, P(&m)); sh != nil {
			serve(h, r, sh, &m)
		}
	}
}

// decode parses the request body into m and resolves the share it names; on failure it has
// already answered with ERROR and returns nil.
func (h *Handler) decode(r *rpc.Request, m body) *share.Share {
	if err := m.Decode(r.Payload()); err != nil {
		code := wire.ErrnoProtocol
		if errors.Is(err, wire.ErrPathRefused) {
			code = wire.ErrnoPathRefused
		}
		r.Fail(code, err.Error())
		return nil
	}
	name := shareOf(m)
	sh, ok := h.Lookup(name)
	if !ok {
		r.Fail(wire.ErrnoNoShare, "no share named "+name+" is shared with you: ask its owner to run \"peerfs share add\" with --peer for you")
		return nil
	}
	return sh
}

// shareOf is the share a decoded body names.
func shareOf(m body) string {
	switch m := m.(type) {
	case *wire.PathReq:
		return m.Share
	case *wire.ReadDirReq:
		return m.Share
	case *wire.ListReq:
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
	case *wire.ApplyReq:
		return m.Share
	}
	return ""
}

// fail answers with the share's error: its code and a text free of the owner's paths.
func (h *Handler) fail(r *rpc.Request, err error) {
	r.Fail(share.Errno(err), share.Message(err))
}

// reply answers with an empty body, or with the error.
func (h *Handler) reply(r *rpc.Request, err error) {
	if err != nil {
		h.fail(r, err)
		return
	}
	r.Reply(nil)
}

// replyMsg answers with m, or with the error.
func (h *Handler) replyMsg(r *rpc.Request, m interface{ AppendTo([]byte) []byte }, err error) {
	if err != nil {
		h.fail(r, err)
		return
	}
	r.Reply(m.AppendTo(nil))
}
