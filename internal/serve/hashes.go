package serve

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// The owner remembers the BLAKE3 hash of each file it sent whole, keyed by what identifies
// that state of the file: device, inode, size, mtime and ctime. A later GET of the unchanged
// file sends the remembered hash and reads the file only once, for the data: hashing costs
// about as much CPU as the encryption of the link, so on a two-core machine this is the
// difference between a first pull and a repeated one (BENCHMARKS.md, "link").
//
// ctime is the key's safeguard: every change of contents sets it to the current time, and
// no one can set it back. Timestamps are coarse (a few milliseconds), so a hash is only
// remembered for a file whose ctime was at least racyWindow older than the start of the
// read that hashed it: a write during the read then moves ctime to a later tick, and the
// check after the read (get) sees it.

// hashCacheSize bounds the remembered hashes (about 100 bytes each, 10 MB at most).
const hashCacheSize = 100_000

// hashes is the owner's one memory of hashes, for every share and link: its key names a file
// on its device, and a file reached through two shares is the same file with the same hash.
var hashes = newHashCache()

// racyWindow is how old a file's ctime must be when its read starts for its hash to be
// remembered: above the kernel's coarsest timestamp tick.
const racyWindow = time.Second

// contentState identifies one state of a file's contents.
type contentState struct {
	dev, ino         uint64
	size             int64
	mtimeNs, ctimeNs int64
}

type hashCache struct {
	c *lru.Cache[contentState, [32]byte]
}

func newHashCache() hashCache {
	c, err := lru.New[contentState, [32]byte](hashCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return hashCache{c}
}

// lookup returns the remembered hash of the file in state st.
func (h hashCache) lookup(st contentState) ([32]byte, bool) { return h.c.Get(st) }

// remember records sum as the hash of the file in state st, read from start on, unless the
// file changed too shortly before that for its ctime to tell a later change.
func (h hashCache) remember(st contentState, sum [32]byte, start time.Time) {
	if st.ctimeNs < start.Add(-racyWindow).UnixNano() {
		h.c.Add(st, sum)
	}
}
