package fusefs

import (
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/stats"
)

// opStats are the counters of seed 000: per FUSE operation calls and request sizes, plus
// cache hits and misses and round trips to the owner.
type opStats struct {
	lookup, getattr, setattr, readdir, open, create, read, write, flush, fsync, release *stats.Op
	mkdir, mknod, unlink, rmdir, rename, link, symlink, statfs, xattr                   *stats.Op
	fetch, send                                                                         *stats.Op // READs and WRITEs sent to the owner
	hits, misses, roundTrips, passthrough, streams, streamWaits                         *atomic.Int64
	// pageDrops counts the times the mount told the kernel to drop a regular file's cached
	// pages and attributes (a change made elsewhere, a rescan, an idle fully cached file).
	pageDrops *atomic.Int64
	// localCreates counts files created through the mount that reached the owner with their
	// first data, without a CREATE round trip of their own (create.go).
	localCreates *atomic.Int64
	// journaled counts changes recorded in the mount's journal and answered at once
	// (journal.go).
	journaled *atomic.Int64
}

func newOpStats(s *stats.Set) *opStats {
	return &opStats{
		lookup: s.Op("lookup"), getattr: s.Op("getattr"), setattr: s.Op("setattr"), readdir: s.Op("readdir"),
		open: s.Op("open"), create: s.Op("create"), read: s.Op("read"), write: s.Op("write"),
		flush: s.Op("flush"), fsync: s.Op("fsync"), release: s.Op("release"), mkdir: s.Op("mkdir"), mknod: s.Op("mknod"),
		unlink: s.Op("unlink"), rmdir: s.Op("rmdir"), rename: s.Op("rename"), link: s.Op("link"),
		symlink: s.Op("symlink"), statfs: s.Op("statfs"), xattr: s.Op("xattr"),
		fetch: s.Op("owner_read"), send: s.Op("owner_write"),
		hits: s.Counter("cache_hits"), misses: s.Counter("cache_misses"),
		roundTrips: s.Counter("round_trips"), passthrough: s.Counter("passthrough_opens"),
		streams: s.Counter("streams"), streamWaits: s.Counter("stream_waits"),
		pageDrops: s.Counter("page_drops"), localCreates: s.Counter("local_creates"),
		journaled: s.Counter("journaled_changes"),
	}
}
