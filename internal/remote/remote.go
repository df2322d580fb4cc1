// Package remote makes typed calls to a peer's shares over an rpc.Session: it encodes requests,
// decodes replies and turns ERROR frames into errors callers can branch on. Peer holds no state
// beyond the session; the direct transfer (internal/transfer) and the node use it. Share is a
// mount's seam to one share: each call takes the link from a Linker the node provides.
package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// Peer is one peer's shares, reached through a session.
type Peer struct{ S *rpc.Session }

// Shares lists the shares the peer exports to us.
func (p Peer) Shares(ctx context.Context) ([]wire.ShareInfo, error) {
	buf, err := p.S.Call(ctx, wire.OpShares, nil)
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	var m wire.Shares
	if err := m.Decode(buf.Payload()); err != nil {
		return nil, fmt.Errorf("SHARES reply: %w", err)
	}
	return m.List, nil
}

// Stat returns the attributes of path in share (lstat semantics).
func (p Peer) Stat(ctx context.Context, share, path string) (wire.Entry, error) {
	req := wire.PathReq{Share: share, Path: path}
	buf, err := p.S.Call(ctx, wire.OpStat, req.AppendTo(nil))
	if err != nil {
		return wire.Entry{}, err
	}
	defer buf.Release()
	var e wire.Entry
	if err := e.Decode(buf.Payload()); err != nil {
		return wire.Entry{}, fmt.Errorf("STAT reply: %w", err)
	}
	return e, nil
}

// ListWindow is the reply payload a listing may have on its way here at once (LIST's
// credit): 16 frames of a quarter MiB, a few milliseconds of decoding, far below what the
// link tolerates queued on one exchange (rpc.MaxQueuedBytes).
const ListWindow = 4 << 20

// ReadDir returns the entries of directory path in share, sorted by name, with the content
// of regular files up to inlineMax bytes inlined (0: none).
func (p Peer) ReadDir(ctx context.Context, share, path string, inlineMax uint32) ([]wire.Entry, error) {
	var all []wire.Entry
	err := p.List(ctx, share, path, inlineMax, func(page []wire.Entry) error {
		all = append(all, page...)
		return nil
	})
	return all, err
}

// List hands the entries of directory path in share to add a reply frame at a time, in name
// order, so a folder of a million names is never held twice. It asks with LIST, whose reply
// frames wait for this side's credit, so a folder of any size is listed at the pace its
// entries are decoded; a peer that predates LIST is asked with READDIR. An error from add
// ends the listing with it; after an error add may have seen part of the folder.
func (p Peer) List(ctx context.Context, share, path string, inlineMax uint32, add func([]wire.Entry) error) error {
	req := wire.ListReq{ReadDirReq: wire.ReadDirReq{Share: share, Path: path, InlineMax: inlineMax}, Window: ListWindow}
	sent := false
	decode := func(payload []byte) error {
		var m wire.Entries
		if err := m.Decode(payload); err != nil {
			return fmt.Errorf("READDIR reply: %w", err)
		}
		sent = true
		return add(m.List)
	}
	err := p.S.CallPaced(ctx, wire.OpList, req.AppendTo(nil), ListWindow, decode)
	var re *wire.RemoteError
	if errors.As(err, &re) && re.Code == wire.ErrnoUnsupported && !sent {
		err = p.S.CallMore(ctx, wire.OpReadDir, req.ReadDirReq.AppendTo(nil), decode)
	}
	return err
}

// Mkdir creates directory path. flags is wire.NameExclusive (an existing name is EEXIST) or 0
// (an existing directory is success).
func (p Peer) Mkdir(ctx context.Context, share, path string, mode, flags uint32) (wire.Entry, error) {
	req := wire.MkdirReq{Share: share, Path: path, Mode: mode, Flags: flags}
	return p.callEntry(ctx, wire.OpMkdir, req.AppendTo(nil))
}

// Symlink creates path as a symbolic link to target. flags is wire.NameExclusive or 0 (an
// existing link is replaced).
func (p Peer) Symlink(ctx context.Context, share, path, target string, flags uint32) (wire.Entry, error) {
	req := wire.SymlinkReq{Share: share, Path: path, Target: target, Flags: flags}
	return p.callEntry(ctx, wire.OpSymlink, req.AppendTo(nil))
}

// SetAttr applies the attributes req.Valid selects (mode, times, size) and returns the path's
// attributes after the change and its state before.
func (p Peer) SetAttr(ctx context.Context, req wire.SetAttrReq) (wire.ChangeResp, error) {
	buf, err := p.S.Call(ctx, wire.OpSetAttr, req.AppendTo(nil))
	if err != nil {
		return wire.ChangeResp{}, err
	}
	defer buf.Release()
	var resp wire.ChangeResp
	if err := resp.Decode(buf.Payload()); err != nil {
		return wire.ChangeResp{}, fmt.Errorf("SETATTR reply: %w", err)
	}
	return resp, nil
}

// Statfs returns the capacity and free space of the filesystem that holds share.
func (p Peer) Statfs(ctx context.Context, share string) (wire.Statfs, error) {
	req := wire.ShareReq{Share: share}
	buf, err := p.S.Call(ctx, wire.OpStatfs, req.AppendTo(nil))
	if err != nil {
		return wire.Statfs{}, err
	}
	defer buf.Release()
	var st wire.Statfs
	if err := st.Decode(buf.Payload()); err != nil {
		return wire.Statfs{}, fmt.Errorf("STATFS reply: %w", err)
	}
	return st, nil
}

// GetXattr returns the value of the extended attribute name of path ("user." namespace). A
// missing attribute is wire.ENODATA.
func (p Peer) GetXattr(ctx context.Context, share, path, name string) ([]byte, error) {
	req := wire.XattrReq{Share: share, Path: path, Name: name}
	buf, err := p.S.Call(ctx, wire.OpGetXattr, req.AppendTo(nil))
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	if n := len(buf.Payload()); n > wire.MaxXattrValue {
		return nil, fmt.Errorf("%w: GETXATTR returned %d bytes, limit %d", rpc.ErrProtocol, n, wire.MaxXattrValue)
	}
	return append([]byte{}, buf.Payload()...), nil
}

// ListXattr returns the names of path's extended attributes in the "user." namespace.
func (p Peer) ListXattr(ctx context.Context, share, path string) ([]string, error) {
	req := wire.PathReq{Share: share, Path: path}
	buf, err := p.S.Call(ctx, wire.OpListXattr, req.AppendTo(nil))
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	var m wire.XattrNames
	if err := m.Decode(buf.Payload()); err != nil {
		return nil, fmt.Errorf("LISTXATTR reply: %w", err)
	}
	return m.Names, nil
}

// SetXattr sets the extended attribute name of path to value; flags are wire.XattrCreate or
// wire.XattrReplace, or 0.
func (p Peer) SetXattr(ctx context.Context, share, path, name string, value []byte, flags uint32) error {
	req := wire.XattrReq{Share: share, Path: path, Name: name, Value: value, Flags: flags}
	return p.callEmpty(ctx, wire.OpSetXattr, req.AppendTo(nil))
}

// RemoveXattr removes the extended attribute name of path.
func (p Peer) RemoveXattr(ctx context.Context, share, path, name string) error {
	req := wire.XattrReq{Share: share, Path: path, Name: name}
	return p.callEmpty(ctx, wire.OpRemoveXattr, req.AppendTo(nil))
}

// Create creates the regular file path (or opens an existing one, unless flags has
// wire.CreateExclusive; wire.CreateTruncate empties it) and returns its attributes.
func (p Peer) Create(ctx context.Context, share, path string, mode, flags uint32) (wire.Entry, error) {
	req := wire.CreateReq{Share: share, Path: path, Mode: mode, Flags: flags}
	return p.callEntry(ctx, wire.OpCreate, req.AppendTo(nil))
}

// CreateWith sends a CREATE as req says (wire.CreateWithData: data of at most wire.MaxChunk
// bytes written once the file exists; wire.CreateSetTimes: its times) and returns the file as
// it then is.
func (p Peer) CreateWith(ctx context.Context, req wire.CreateReq) (wire.Entry, error) {
	if len(req.Data) > wire.MaxChunk {
		return wire.Entry{}, fmt.Errorf("CREATE with %d bytes: at most %d go in one request", len(req.Data), wire.MaxChunk)
	}
	return p.callEntry(ctx, wire.OpCreate, req.AppendTo(nil))
}

// Write writes data, at most wire.MaxChunk bytes, at offset off of the existing regular file
// path and returns the file's attributes after the write. data is copied before Write returns.
func (p Peer) Write(ctx context.Context, share, path string, off uint64, data []byte) (wire.ChangeResp, error) {
	if len(data) > wire.MaxChunk {
		return wire.ChangeResp{}, fmt.Errorf("WRITE of %d bytes: at most %d go in one request", len(data), wire.MaxChunk)
	}
	req := wire.WriteReq{Share: share, Path: path, Offset: off}
	// The head in a small pooled frame buffer, the data sent from where it is: a 1 MiB write
	// allocates nothing and is not copied before encryption.
	headLen := len(req.AppendTo(nil))
	body := rpc.GetBuffer(headLen)
	req.AppendTo(body.Payload()[:0])
	buf, err := p.S.CallBuffer(ctx, wire.OpWrite, body, data)
	if err != nil {
		return wire.ChangeResp{}, err
	}
	defer buf.Release()
	var resp wire.ChangeResp
	if err := resp.Decode(buf.Payload()); err != nil {
		return wire.ChangeResp{}, fmt.Errorf("WRITE reply: %w", err)
	}
	return resp, nil
}

// Unlink removes the non-directory name path.
func (p Peer) Unlink(ctx context.Context, share, path string) error {
	req := wire.PathReq{Share: share, Path: path}
	return p.callEmpty(ctx, wire.OpUnlink, req.AppendTo(nil))
}

// Rmdir removes the empty directory path.
func (p Peer) Rmdir(ctx context.Context, share, path string) error {
	req := wire.PathReq{Share: share, Path: path}
	return p.callEmpty(ctx, wire.OpRmdir, req.AppendTo(nil))
}

// Rename renames from to to; flags are wire.RenameNoReplace or wire.RenameExchange, or 0.
func (p Peer) Rename(ctx context.Context, share, from, to string, flags uint32) error {
	req := wire.RenameReq{Share: share, From: from, To: to, Flags: flags}
	return p.callEmpty(ctx, wire.OpRename, req.AppendTo(nil))
}

// Link makes to a new hard link to from and returns the attributes of to.
func (p Peer) Link(ctx context.Context, share, from, to string) (wire.Entry, error) {
	req := wire.LinkReq{Share: share, From: from, To: to}
	return p.callEntry(ctx, wire.OpLink, req.AppendTo(nil))
}

// Fallocate applies fallocate(2) with mode (Linux FALLOC_FL_* bits) to [off, off+length) of
// the regular file path and returns its attributes after the change.
func (p Peer) Fallocate(ctx context.Context, share, path string, mode uint32, off, length uint64) (wire.Entry, error) {
	req := wire.FallocateReq{Share: share, Path: path, Mode: mode, Offset: off, Length: length}
	return p.callEntry(ctx, wire.OpFallocate, req.AppendTo(nil))
}

// Mknod makes a FIFO, socket or device node at path (mode: wire type bits and permission
// bits; rdev in Linux's encoding) and returns its attributes.
func (p Peer) Mknod(ctx context.Context, share, path string, mode uint32, rdev uint64) (wire.Entry, error) {
	req := wire.MknodReq{Share: share, Path: path, Mode: mode, Rdev: rdev}
	return p.callEntry(ctx, wire.OpMknod, req.AppendTo(nil))
}

// Fsync has the owner flush path (a file or directory; "" for the share root) to stable
// storage: its data only with dataOnly.
func (p Peer) Fsync(ctx context.Context, share, path string, dataOnly bool) error {
	req := wire.FsyncReq{Share: share, Path: path, DataOnly: dataOnly}
	return p.callEmpty(ctx, wire.OpFsync, req.AppendTo(nil))
}

// Apply sends one APPLY, a batch of a mount's journal, and returns the owner's one reply
// frame: its marks and a result per op it answered (PROTOCOL.md, APPLY). A peer that predates
// APPLY fails it with a *wire.RemoteError of Code wire.ErrnoUnsupported
// (errors.Is(err, wire.ErrnoUnsupported)); the caller then sends each change as its own request.
func (p Peer) Apply(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error) {
	// The batch is encoded once, into the frame buffer it leaves in: up to a MiB of ops is
	// not copied again on its way out.
	n := applyLen(&req)
	if n > wire.MaxFrameLen {
		return wire.ApplyResp{}, fmt.Errorf("APPLY of %d ops is %d bytes, past the frame limit %d", len(req.Ops), n, wire.MaxFrameLen)
	}
	body := rpc.GetBuffer(n)
	if got := len(req.AppendTo(body.Payload()[:0])); got != n {
		body.Release()
		return wire.ApplyResp{}, fmt.Errorf("APPLY encoded to %d bytes, %d expected", got, n)
	}
	buf, err := p.S.CallBuffer(ctx, wire.OpApply, body, nil)
	if err != nil {
		return wire.ApplyResp{}, err
	}
	defer buf.Release()
	var resp wire.ApplyResp
	if err := resp.Decode(buf.Payload()); err != nil {
		return wire.ApplyResp{}, fmt.Errorf("APPLY reply: %w", err)
	}
	return resp, nil
}

// applyLen is the encoded length of req (wire.ApplyReq.AppendTo).
func applyLen(req *wire.ApplyReq) int {
	n := 2 + len(req.Share) + wire.JournalIDLen + 8 + 1 + 4
	for i := range req.Ops {
		n += 1 + 1 + 4 + len(req.Ops[i].Body)
		if req.Ops[i].Flags&wire.ApplyHasBase != 0 {
			n += 8 * 3
		}
	}
	return n
}

// callEmpty makes a request whose reply has an empty body.
func (p Peer) callEmpty(ctx context.Context, op wire.Op, body []byte) error {
	buf, err := p.S.Call(ctx, op, body)
	buf.Release()
	return err
}

// callEntry makes a request whose reply is one Entry.
func (p Peer) callEntry(ctx context.Context, op wire.Op, body []byte) (wire.Entry, error) {
	buf, err := p.S.Call(ctx, op, body)
	if err != nil {
		return wire.Entry{}, err
	}
	defer buf.Release()
	var e wire.Entry
	if err := e.Decode(buf.Payload()); err != nil {
		return wire.Entry{}, fmt.Errorf("%v reply: %w", op, err)
	}
	return e, nil
}

// Get opens a GET stream of path from offset and returns the file's attributes as the owner
// saw them when the stream started.
func (p Peer) Get(ctx context.Context, share, path string, offset uint64, window uint32) (wire.Entry, *rpc.InStream, error) {
	req := wire.GetReq{Share: share, Path: path, Offset: offset, Window: window}
	return p.openIn(ctx, wire.OpGet, req.AppendTo(nil), window)
}

// Put opens a PUT stream and returns the offset the owner already holds (resume) and the stream.
func (p Peer) Put(ctx context.Context, req wire.PutReq) (uint64, *rpc.OutStream, error) {
	head, out, err := p.S.OpenOutStream(ctx, wire.OpPut, req.AppendTo(nil))
	if err != nil {
		return 0, nil, err
	}
	defer head.Release()
	var r wire.PutResp
	if err := r.Decode(head.Payload()); err != nil {
		out.Abort()
		return 0, nil, fmt.Errorf("PUT head: %w", err)
	}
	return r.Offset, out, nil
}

// Read reads one range of a file into dst and returns the number of bytes read (fewer than
// len(dst) only at end of file).
func (p Peer) Read(ctx context.Context, share, path string, off uint64, dst []byte) (int, error) {
	if len(dst) > wire.MaxChunk {
		dst = dst[:wire.MaxChunk]
	}
	req := wire.ReadReq{Share: share, Path: path, Offset: off, Length: uint32(len(dst))}
	buf, err := p.S.Call(ctx, wire.OpRead, req.AppendTo(nil))
	if err != nil {
		return 0, err
	}
	defer buf.Release()
	if len(buf.Payload()) > len(dst) {
		return 0, fmt.Errorf("%w: READ returned %d bytes for %d asked", rpc.ErrProtocol, len(buf.Payload()), len(dst))
	}
	return copy(dst, buf.Payload()), nil
}

// Stream opens a STREAM of [off, off+length) of path (cut at the end of the file) and returns
// the file's attributes as the owner saw them when the stream started.
func (p Peer) Stream(ctx context.Context, share, path string, off, length uint64, window uint32) (wire.Entry, *rpc.InStream, error) {
	req := wire.StreamReq{Share: share, Path: path, Offset: off, Length: length, Window: window}
	return p.openIn(ctx, wire.OpStream, req.AppendTo(nil), window)
}

// openIn opens a stream the owner pushes (GET, STREAM), whose head is the file's Entry.
func (p Peer) openIn(ctx context.Context, op wire.Op, body []byte, window uint32) (wire.Entry, *rpc.InStream, error) {
	head, in, err := p.S.OpenInStream(ctx, op, body, window)
	if err != nil {
		return wire.Entry{}, nil, err
	}
	defer head.Release()
	var e wire.Entry
	if err := e.Decode(head.Payload()); err != nil {
		in.Close()
		return wire.Entry{}, nil, fmt.Errorf("%v head: %w", op, err)
	}
	return e, in, nil
}
