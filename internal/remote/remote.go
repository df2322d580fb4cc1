// Package remote makes typed calls to a peer's shares over an rpc.Session: it encodes requests,
// decodes replies and turns ERROR frames into errors callers can branch on. It holds no state
// beyond the session; the direct transfer (internal/transfer) and the node use it.
package remote

import (
	"context"
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

// ReadDir returns the entries of directory path in share, sorted by name.
func (p Peer) ReadDir(ctx context.Context, share, path string) ([]wire.Entry, error) {
	req := wire.PathReq{Share: share, Path: path}
	var all []wire.Entry
	err := p.S.CallMore(ctx, wire.OpReadDir, req.AppendTo(nil), func(payload []byte) error {
		var m wire.Entries
		if err := m.Decode(payload); err != nil {
			return fmt.Errorf("READDIR reply: %w", err)
		}
		all = append(all, m.List...)
		return nil
	})
	return all, err
}

// Mkdir creates directory path (an existing directory is success).
func (p Peer) Mkdir(ctx context.Context, share, path string, mode uint32) error {
	req := wire.MkdirReq{Share: share, Path: path, Mode: mode}
	return p.callEmpty(ctx, wire.OpMkdir, req.AppendTo(nil))
}

// Symlink creates path as a symbolic link to target.
func (p Peer) Symlink(ctx context.Context, share, path, target string) error {
	req := wire.SymlinkReq{Share: share, Path: path, Target: target}
	return p.callEmpty(ctx, wire.OpSymlink, req.AppendTo(nil))
}

// SetAttr sets the mode and/or mtime of path.
func (p Peer) SetAttr(ctx context.Context, req wire.SetAttrReq) error {
	return p.callEmpty(ctx, wire.OpSetAttr, req.AppendTo(nil))
}

func (p Peer) callEmpty(ctx context.Context, op wire.Op, body []byte) error {
	buf, err := p.S.Call(ctx, op, body)
	buf.Release()
	return err
}

// Get opens a GET stream of path from offset and returns the file's attributes as the owner
// saw them when the stream started.
func (p Peer) Get(ctx context.Context, share, path string, offset uint64, window uint32) (wire.Entry, *rpc.InStream, error) {
	req := wire.GetReq{Share: share, Path: path, Offset: offset, Window: window}
	head, in, err := p.S.OpenInStream(ctx, wire.OpGet, req.AppendTo(nil), window)
	if err != nil {
		return wire.Entry{}, nil, err
	}
	defer head.Release()
	var e wire.Entry
	if err := e.Decode(head.Payload()); err != nil {
		in.Close()
		return wire.Entry{}, nil, fmt.Errorf("GET head: %w", err)
	}
	return e, in, nil
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
