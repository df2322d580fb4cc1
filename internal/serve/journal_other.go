//go:build !linux

package serve

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/share"
)

// flushesByFile: without syncfs(2) a journal remembers the files and directories it changed
// since its last SYNC, and flushes each.
const flushesByFile = true

// syncApplied makes durable what a journal applied to sh: each path it touched (the files it
// changed and their directories) is flushed. A path gone since (renamed or removed by a later
// op, whose directory is flushed too) or that cannot be flushed alone (a symlink, a device) is
// passed over.
func syncApplied(sh *share.Share, touched map[string]struct{}) error {
	for p := range touched {
		err := sh.Fsync(p, false)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, share.ErrPathRefused) {
			return err
		}
	}
	return nil
}
