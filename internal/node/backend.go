package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transfer"
	"github.com/peerfs/peerfs/internal/wire"
)

var _ api.Backend = (*Node)(nil)

// Status reports this device and every trusted peer.
func (n *Node) Status(ctx context.Context) (*api.StatusResult, error) {
	n.mu.Lock()
	res := &api.StatusResult{DeviceID: n.id.ID, Name: n.cfg.Name}
	if n.ln != nil {
		res.Listen = n.ln.Addr().String()
	}
	order := make([]*peer, 0, len(n.cfg.Peers))
	for _, pc := range n.cfg.Peers {
		if p := n.peers[pc.ID]; p != nil {
			order = append(order, p)
		}
	}
	relays := append([]*relayClient(nil), n.relays...)
	n.mu.Unlock()
	res.Relays = []api.RelayStatus{}
	for _, rc := range relays {
		res.Relays = append(res.Relays, rc.status())
	}
	now := time.Now()
	for _, p := range order {
		p.mu.Lock()
		ps := api.PeerStatus{Name: p.cfg.Name, DeviceID: p.cfg.ID, Addr: p.cfg.Addr, Transfers: []api.TransferStatus{}}
		if ps.Addr == "" {
			ps.Addr = p.lastAddr
		}
		if p.sess != nil && p.sess.Err() == nil {
			ps.Connected, ps.Since = true, p.since
			ps.RTTMicros = p.sess.RTT().Microseconds()
			ps.TLS, ps.Cipher, ps.KeyExch = p.conn.Info.Version, p.conn.Info.CipherSuite, p.conn.Info.Group
			ps.Protocol = p.sess.Version()
			ps.BytesIn, ps.BytesOut = p.pastIn+p.sess.BytesIn(), p.pastOut+p.sess.BytesOut()
			for _, l := range p.extra { // links draining after a rekey, or the peer's others
				ps.BytesIn += l.sess.BytesIn()
				ps.BytesOut += l.sess.BytesOut()
			}
			ps.Rekeys = p.rekeys
			ps.RemoteAddr = p.conn.RemoteAddr().String()
			how := p.pathOfLocked(p.sess)
			ps.Path, ps.Via = how.kind, how.via
		} else if p.lastErr != nil {
			ps.LastError = p.lastErr.Error()
		}
		for _, t := range p.transfers {
			ps.Transfers = append(ps.Transfers, *t)
		}
		ps.Candidates = p.candidateStatusLocked(now, relays)
		p.mu.Unlock()
		res.Peers = append(res.Peers, ps)
	}
	return res, nil
}

// peerByName finds a configured peer.
func (n *Node) peerByName(name string) (*peer, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	pc := n.cfg.PeerByName(name)
	if pc == nil {
		return nil, api.Errorf(api.CodeUnknownPeer, "no peer named %q: add it with \"peerfs peer add ID --name %s\" (see \"peerfs peer ls\")", name, name)
	}
	return n.peers[pc.ID], nil
}

func (n *Node) link(ctx context.Context, name string) (*peer, *rpc.Session, error) {
	p, err := n.peerByName(name)
	if err != nil {
		return nil, nil, err
	}
	sess, err := p.session(ctx, connectWait, false)
	return p, sess, err
}

// use is link for a caller that runs calls on the link: u.done must be called when they are
// over, and until then a link being replaced stays open for them (rekey.go). A transfer
// keeps the link it started on.
func (n *Node) use(ctx context.Context, name string) (p *peer, sess *rpc.Session, u *linkUse, err error) {
	p, err = n.peerByName(name)
	if err != nil {
		return nil, nil, nil, err
	}
	sess, u, err = p.acquire(ctx, connectWait, false)
	return p, sess, u, err
}

// List lists a peer's shares, a directory of a share, or one file.
func (n *Node) List(ctx context.Context, a api.ListParams) (*api.ListResult, error) {
	_, sess, u, err := n.use(ctx, a.Peer)
	defer u.done()
	if err != nil {
		return nil, err
	}
	rp := remote.Peer{S: sess}
	spec := a.Peer + ":" + a.Share + "/" + a.Path
	if a.Share == "" {
		list, err := rp.Shares(ctx)
		if err != nil {
			return nil, apiError(err, "listing shares of "+a.Peer)
		}
		res := &api.ListResult{Shares: []api.ShareInfo{}}
		for _, s := range list {
			res.Shares = append(res.Shares, api.ShareInfo{Name: s.Name, ReadOnly: s.ReadOnly})
		}
		return res, nil
	}
	st, err := rp.Stat(ctx, a.Share, a.Path)
	if err != nil {
		return nil, apiError(err, spec)
	}
	res := &api.ListResult{Entries: []api.Entry{}}
	if !st.IsDir() {
		st.Name = filepath.Base("/" + a.Path)
		res.Entries = append(res.Entries, toAPIEntry(st))
		return res, nil
	}
	list, err := rp.ReadDir(ctx, a.Share, a.Path, 0)
	if err != nil {
		return nil, apiError(err, spec)
	}
	for _, e := range list {
		res.Entries = append(res.Entries, toAPIEntry(e))
	}
	return res, nil
}

func toAPIEntry(e wire.Entry) api.Entry {
	t := "other"
	switch {
	case e.IsDir():
		t = "dir"
	case e.IsRegular():
		t = "file"
	case e.IsSymlink():
		t = "symlink"
	}
	return api.Entry{Name: e.Name, Type: t, Mode: e.Mode, Size: int64(e.Size), Mtime: time.Unix(0, e.MtimeNs),
		Nlink: e.Nlink, UID: e.UID, GID: e.GID, Target: e.Target}
}

// Pull copies a file or tree of a peer's share to a local path.
func (n *Node) Pull(ctx context.Context, a api.PullParams, emit func(api.Event)) (*api.TransferResult, error) {
	spec, res, err := n.direct(ctx, directJob{pull: true, peer: a.Peer, share: a.Share, remotePath: a.Path, local: a.Dest}, emit)
	if err != nil {
		return nil, err
	}
	return toAPIResult(spec, res), nil
}

// Send copies a local file or tree into a directory of a peer's share.
func (n *Node) Send(ctx context.Context, a api.SendParams, emit func(api.Event)) (*api.TransferResult, error) {
	_, res, err := n.direct(ctx, directJob{peer: a.Peer, share: a.Share, remotePath: a.Dir, local: a.Source}, emit)
	if err != nil {
		return nil, err
	}
	out := toAPIResult(a.Source, res)
	out.Dest = a.Peer + ":" + a.Share + "/" + res.Dest
	return out, nil
}

// directJob is a pull or a send as the API asked for it.
type directJob struct {
	pull                    bool // else a send
	peer, share, remotePath string
	local                   string // the pull's destination or the send's source, absolute
}

// direct checks the job's paths, runs it over a link to its peer, listed in status and
// reported through emit, and returns the remote side as the user names it ("peer:share/path").
func (n *Node) direct(ctx context.Context, j directJob, emit func(api.Event)) (string, *transfer.Result, error) {
	kind, verb, role := "send", "send to", "source"
	if j.pull {
		kind, verb, role = "pull", "pull", "destination"
	}
	if !filepath.IsAbs(j.local) {
		return "", nil, api.Errorf(api.CodeInvalid, "%s %q must be an absolute path", role, j.local)
	}
	if err := wire.CheckPath(j.remotePath); err != nil {
		return "", nil, api.Errorf(api.CodePathRefused, "%v", err)
	}
	p, sess, u, err := n.use(ctx, j.peer)
	defer u.done()
	if err != nil {
		return "", nil, err
	}
	spec := j.peer + ":" + j.share + "/" + j.remotePath
	done := n.track(p, kind, spec, j.local, emit)
	peer, opts := remote.Peer{S: sess}, transfer.Options{OnProgress: done.progress, Logger: n.log}
	var res *transfer.Result
	if j.pull {
		res, err = transfer.Pull(ctx, peer, j.share, j.remotePath, j.local, opts)
	} else {
		res, err = transfer.Send(ctx, peer, j.local, j.share, j.remotePath, opts)
	}
	done.finish(err)
	if err != nil {
		return "", nil, apiError(err, verb+" "+spec)
	}
	return spec, res, nil
}

func toAPIResult(source string, r *transfer.Result) *api.TransferResult {
	out := &api.TransferResult{Source: source, Dest: r.Dest, Files: r.Files, Dirs: r.Dirs, Symlinks: r.Symlinks,
		Skipped: r.Skipped, Bytes: r.Bytes, TotalBytes: r.TotalBytes, Resumed: r.Resumed,
		Elapsed: r.Elapsed.Seconds()}
	if s := r.Elapsed.Seconds(); s > 0 {
		out.Rate = float64(r.Bytes) / s
	}
	if r.Hash != nil {
		out.Hash = fmt.Sprintf("%x", r.Hash)
	}
	return out
}

// tracked is a transfer listed in status and reported through emit.
type tracked struct {
	p    *peer
	id   string
	st   *api.TransferStatus
	emit func(api.Event)
}

func (n *Node) track(p *peer, kind, remoteSpec, local string, emit func(api.Event)) *tracked {
	n.mu.Lock()
	n.nextID++
	id := strconv.Itoa(n.nextID)
	n.mu.Unlock()
	t := &tracked{p: p, id: id, emit: emit,
		st: &api.TransferStatus{ID: id, Kind: kind, Remote: remoteSpec, Local: local, Started: time.Now()}}
	p.mu.Lock()
	p.transfers[id] = t.st
	p.mu.Unlock()
	if emit != nil {
		emit(api.Event{Type: "start", Path: remoteSpec})
	}
	return t
}

func (t *tracked) progress(pr transfer.Progress) {
	t.p.mu.Lock()
	t.st.Bytes, t.st.Total, t.st.Files, t.st.FilesDone = pr.Bytes, pr.TotalBytes, pr.Files, pr.FilesDone
	t.p.mu.Unlock()
	if t.emit != nil {
		ev := api.Event{Type: "progress", Path: pr.Path, Files: pr.Files, FilesDone: pr.FilesDone,
			Bytes: pr.Bytes, TotalBytes: pr.TotalBytes, Resumed: pr.Resumed, Elapsed: pr.Elapsed.Seconds()}
		if s := pr.Elapsed.Seconds(); s > 0 {
			ev.Rate = float64(pr.Bytes) / s
		}
		t.emit(ev)
	}
}

// finish takes the transfer off the list and counts it, with its bytes, for the metrics.
func (t *tracked) finish(err error) {
	t.p.mu.Lock()
	delete(t.p.transfers, t.id)
	t.p.n.metrics.transferDone(t.p.cfg.ID, t.st, err)
	t.p.mu.Unlock()
}

// apiError maps an error of a remote or local operation to an api.Error with a code and a
// message that says what to do. what names the operation.
func apiError(err error, what string) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	var re *wire.RemoteError
	if errors.As(err, &re) {
		code := api.CodeInternal
		hint := ""
		switch re.Code {
		case wire.ENOENT:
			code = api.CodeNotFound
		case wire.ErrnoNoShare:
			code = api.CodeUnknownShare
		case wire.EACCES, wire.EPERM, wire.EROFS:
			code = api.CodePermission
		case wire.ErrnoPathRefused:
			code = api.CodePathRefused
		case wire.ENOSPC, wire.EDQUOT:
			code, hint = api.CodeDiskFull, " (on the peer): free space there and run the same command again to resume"
		case wire.ErrnoHashMismatch, wire.ErrnoChanged:
			code = api.CodeIntegrity
		case wire.ENOTDIR, wire.EISDIR, wire.EINVAL, wire.EEXIST:
			code = api.CodeInvalid
		}
		return api.Errorf(code, "%s: %s%s", what, re.Message, hint)
	}
	code := api.CodeInternal
	hint := ""
	switch {
	case errors.Is(err, context.Canceled):
		code = api.CodeCanceled
	case errors.Is(err, rpc.ErrPeerGone):
		code, hint = api.CodePeerUnreachable, "; run the same command again to resume"
	case errors.Is(err, transfer.ErrHashMismatch), errors.Is(err, transfer.ErrChanged):
		code = api.CodeIntegrity
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code, hint = api.CodeDiskFull, ": free space here and run the same command again to resume"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		code = api.CodePermission
	case errors.Is(err, fs.ErrNotExist):
		code = api.CodeNotFound
	case errors.Is(err, wire.ErrPathRefused), rootfs.IsEscape(err):
		code = api.CodePathRefused
	}
	return api.Errorf(code, "%s: %v%s", what, err, hint)
}
