package serve

import "github.com/peerfs/peerfs/internal/share"

// flushesByFile: on Linux one syncfs(2) flushes all a journal applied, so it need not
// remember the files it touched.
const flushesByFile = false

// syncApplied makes durable what a journal applied to sh: syncfs(2) of the share's file
// system, one call however many files the journal changed (it flushes others' changes on that
// file system too, which a journal's SYNC rarely waits long for).
func syncApplied(sh *share.Share, _ map[string]struct{}) error { return sh.Syncfs() }
