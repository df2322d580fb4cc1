//go:build !windows

package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/fusefs"
	"github.com/peerfs/peerfs/internal/outbox"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/wire"
)

// A journaling mount (mount --writes journal) keeps its changes in a journal on this disk
// (internal/outbox) until the owner has them: one per mount point and share, under the data
// directory, so that a mount made again after a restart or a crash of the daemon finds the
// changes it had not sent yet and sends them.

// writesMode checks a.Writes, filling in its default, and reports whether the mount journals.
func writesMode(a *api.MountParams) (bool, error) {
	switch a.Writes {
	case "", api.WritesSync:
		a.Writes = api.WritesSync
		return false, nil
	case api.WritesJournal:
		return true, nil
	}
	return false, api.Errorf(api.CodeInvalid, "--writes %q: use sync (a change returns once the peer applied it) "+
		"or journal (once it is in the mount's journal on this disk)", a.Writes)
}

// journalDir is where the journal of a mount of peer:share at dir lives.
func (n *Node) journalDir(a api.MountParams) string {
	sum := sha256.Sum256([]byte(a.Peer + "\x00" + a.Share + "\x00" + a.Dir))
	return filepath.Join(n.paths.Data, "mount-journals", fmt.Sprintf("%x", sum[:12]))
}

// openJournal opens the journal of a mount; results go to the root *into once it is set
// (before the journal runs).
func (n *Node) openJournal(a api.MountParams, into **fusefs.Root) (*outbox.Outbox, error) {
	box, err := outbox.Open(outbox.Options{Dir: n.journalDir(a), Logger: n.log.With("mount", a.Dir),
		OnResult: func(seq uint64, op wire.ApplyOp, r wire.ApplyResult) { (*into).JournalResult(seq, op, r) }})
	if errors.Is(err, outbox.ErrDamaged) {
		return nil, api.Errorf(api.CodeInternal, "the journal of this mount cannot be trusted (%v): "+
			"mount with --writes sync, or move %s away to start a new journal (the changes it holds are lost then)",
			err, n.journalDir(a))
	}
	if err != nil {
		return nil, fmt.Errorf("opening the mount's journal: %w", err)
	}
	return box, nil
}

// runJournal sends a mount's journal to the owner until ctx ends. Send errors are the
// outbox's to retry; what ends its Run (an owner without APPLY, a damaged journal) is logged,
// and the journal is tried again a minute later, the changes kept.
func (n *Node) runJournal(ctx context.Context, box *outbox.Outbox, owner *remote.Share, dir string) {
	for {
		err := box.Run(ctx, owner)
		if ctx.Err() != nil || errors.Is(err, outbox.ErrClosed) {
			return
		}
		n.log.Error("the mount's changes cannot reach the owner; they stay in its journal", "dir", dir, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// journalInfo is the API's view of a mount's journal, or nil for a mount without one.
func journalInfo(root *fusefs.Root) *api.JournalInfo {
	st, ok := root.Journal()
	if !ok {
		return nil
	}
	info := &api.JournalInfo{Online: st.Online, Waiting: st.Waiting, WaitingBytes: st.WaitingBytes,
		Oldest: st.Oldest, LogBytes: st.LogBytes, Refused: st.Refused}
	if st.LastError != nil && st.Waiting > 0 {
		info.LastError = st.LastError.Error()
	}
	for _, r := range st.Refusals {
		info.Refusals = append(info.Refusals, api.RefusalInfo{Time: r.Time, Op: r.Op, Path: r.Path, Error: r.Err})
	}
	return info
}
