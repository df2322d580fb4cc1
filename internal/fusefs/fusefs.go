// Package fusefs presents a peer's share as a local folder through FUSE (go-fuse v2). It
// speaks the kernel's words: Root holds mount-wide state, Node is an inode (embeds fs.Inode;
// what a file opened or written here needs besides, fileState, is made at its first open),
// Handle is an open file. It never sees a frame: metadata comes from the tree replica and the
// Owner interface (a remote.Share), file contents from the chunk cache (filled by
// internal/fetch), and writes go through writeback.
//
// Read flow: kernel -> Handle.Read -> cache hit: a copy out of the cache file (under a
// reference of its own), or passthrough once the file is fully cached -> miss of a
// sequential reader: wait for the file's STREAM, which runs ahead of it into the cache
// (fetch.ReadSequential) -> miss of a random reader: fetch the missing chunks with many READs
// in flight (fetch.ReadInto), write them to the cache, reply.
// Write flow: kernel -> Handle.Write -> writeback extents -> full pieces leave in the
// background past 4 MiB dirty (write-behind); Flush/Fsync/Release, 64 MiB dirty or flushDelay
// after the first unsent write send everything (flush.go) -> sorted, pipelined WRITEs ->
// owner.
package fusefs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/fetch"
	"github.com/peerfs/peerfs/internal/outbox"
	"github.com/peerfs/peerfs/internal/stats"
	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
	"github.com/peerfs/peerfs/internal/writeback"
)

// Owner is what the mount needs from the peer that owns the share (remote.Share does it):
// share-relative paths, errors carrying the owner's errno (*wire.RemoteError), and a bounded
// wait when the link is down (then an error the mount turns into EIO). Requests name the
// share there: the mount leaves wire requests' Share empty.
type Owner interface {
	Stat(ctx context.Context, path string) (wire.Entry, error)
	// List hands a directory's entries to add a reply frame at a time, in name order.
	List(ctx context.Context, path string, inlineMax uint32, add func([]wire.Entry) error) error
	fetch.Owner // Read and Stream
	// Write writes data at off and returns the file after the write and its state just
	// before, so the mount can tell its own changes from someone else's.
	Write(ctx context.Context, path string, off int64, data []byte) (wire.ChangeResp, error)
	Create(ctx context.Context, path string, mode, flags uint32) (wire.Entry, error)
	// CreateWith sends a CREATE with its first data or its times (wire.CreateWithData,
	// wire.CreateSetTimes) and returns the file as it then is.
	CreateWith(ctx context.Context, req wire.CreateReq) (wire.Entry, error)
	// Mkdir and Symlink fail with EEXIST when the name exists on the owner, as mkdir(2) and
	// symlink(2) do.
	Mkdir(ctx context.Context, path string, mode uint32) (wire.Entry, error)
	Symlink(ctx context.Context, path, target string) (wire.Entry, error)
	Link(ctx context.Context, from, to string) (wire.Entry, error)
	Unlink(ctx context.Context, path string) error
	Rmdir(ctx context.Context, path string) error
	Rename(ctx context.Context, from, to string, flags uint32) error
	// SetAttr changes attributes and returns the file after the change and its state before.
	SetAttr(ctx context.Context, req wire.SetAttrReq) (wire.ChangeResp, error)
	Fallocate(ctx context.Context, path string, mode uint32, off, length int64) (wire.Entry, error)
	// Mknod makes a FIFO, socket or device node (mode: wire type and permission bits).
	Mknod(ctx context.Context, path string, mode uint32, rdev uint64) (wire.Entry, error)
	Fsync(ctx context.Context, path string, dataOnly bool) error
	Statfs(ctx context.Context) (wire.Statfs, error)
	GetXattr(ctx context.Context, path, name string) ([]byte, error)
	ListXattr(ctx context.Context, path string) ([]string, error)
	SetXattr(ctx context.Context, path, name string, value []byte, flags uint32) error
	RemoveXattr(ctx context.Context, path, name string) error
}

// Tuning defaults.
const (
	// DefaultBlksize is the st_blksize and statfs block size reported: cp, rsync and friends
	// size their buffers from it (seed 000). 1 MiB matches the FUSE request size.
	DefaultBlksize = 1 << 20
	// DefaultInline is the size up to which files' contents come inline in directory listings
	// (seed 004), so opening small files costs no round trip. The tune sweep (BENCHMARKS.md)
	// weighs a cold find + cat, which inlining speeds up (2.48 s at 4K, 0.88 s at 64K, 3000
	// files), against a cold find -ls, which pays for contents it never reads (0.41 s at
	// 4K, 0.61 s at 64K): 64K takes the least time for both together, and on a WAN link each
	// READ saved is a round trip while the bytes cost little. The replica keeps at most
	// tree.DefaultInlineBudget of contents in memory.
	DefaultInline = 64 << 10
	// DefaultReadahead is how far past a sequential reader its stream runs.
	DefaultReadahead = 16 << 20
	// DefaultReadsInFlight bounds the READs one mount keeps in flight for random reads (rpc
	// allows 64 per link; the rest is left for metadata and writes).
	DefaultReadsInFlight = 32
	// DefaultWritesInFlight is how many WRITEs one flush keeps in flight.
	DefaultWritesInFlight = writeback.InFlight
	// DefaultKernelReadahead is the kernel's readahead window on the mount: a sequential
	// reader's FUSE READs come as 1 MiB requests, one window at a time. Larger windows put
	// more READs in flight but cost more CPU per byte on two cores (BENCHMARKS.md, Tuning:
	// 785 MiB/s at 1M against 645 at 4M).
	DefaultKernelReadahead = 1 << 20
	// DefaultPiece is the size of one READ or WRITE to the owner: the FUSE request size.
	DefaultPiece = wire.MaxChunk
	// writeBehind is how much unsent data one file may hold before full pieces start leaving
	// in the background while the application keeps writing.
	writeBehind = 4 << 20
	// dirtyLimit is how much unsent data one file may hold before a write waits for a flush:
	// the owner's pace then sets the writer's.
	dirtyLimit = 64 << 20
	// flushDelay is the longest written data waits in the mount while its file stays open:
	// the owner's readers see it soon, and a crash of this machine loses at most that much.
	flushDelay = time.Second
)

// Options configure a mount.
type Options struct {
	Peer, Share string
	Owner       Owner
	Cache       *cache.Store
	Blksize     int    // 0: DefaultBlksize
	Inline      uint32 // 0: DefaultInline
	// Events says the owner pushes change events (WATCH): kernel caches can then be kept for
	// long and invalidated explicitly; without events, metadata is trusted for one second.
	Events      bool
	Passthrough bool // serve fully cached files by FUSE passthrough when the kernel allows
	// UID and GID are the mounting user's; OwnerUID and OwnerGID those of the share's folder
	// on the owner, taken for the owner's own. MapIDs shows the owner's as the mounting
	// user's and back (owners.go).
	UID, GID           uint32
	OwnerUID, OwnerGID uint32
	MapIDs             bool
	// AllowOther lets every user of this machine use the mount (FUSE allow_other), with the
	// kernel checking mode bits, sticky directories and groups as on a local disk
	// (default_permissions).
	AllowOther bool
	Logger     *slog.Logger
	Stats      *stats.Set
	// Journal, when set, makes changes complete here and reach the owner through it
	// (journal.go); the caller runs it (Run) and passes its results to JournalResult.
	// JournalWait bounds how long a question waits for it while the owner is online.
	Journal     *outbox.Outbox
	JournalWait time.Duration

	// Tuning; zero means the default above. BENCHMARKS.md shows the sweeps the defaults
	// come from.
	Readahead int64 // bytes a sequential reader's stream runs ahead
	// KernelReadahead is the kernel's readahead window on the mount; setting it needs root.
	KernelReadahead int64
	ReadsInFlight   int // READs in flight for random reads
	WritesInFlight  int // WRITEs in flight per flush
	Piece           int // bytes per WRITE, at most wire.MaxChunk; READs round it up to whole cache chunks
}

// Root is mount-wide state; every Node reaches it through root().
type Root struct {
	Node
	opts    Options
	owner   Owner
	replica *tree.Replica
	cache   *cache.Store
	log     *slog.Logger
	stats   *opStats
	server  *fuse.Server

	// journal is the owner as the mount's journal shows it, when it has one (owner is it).
	journal *journalOwner

	// fetch brings contents into the cache; it stops when the mount's server ends (Mount).
	fetch *fetch.Fetcher

	// passthrough is Options.Passthrough once the mount proved the kernel accepts backing files.
	passthrough atomic.Bool

	// gen is bumped whenever the owner's namespace is rescanned, so stale kernel entries
	// cannot alias new files.
	gen atomic.Uint64
	// watching says change events flow (EventsFlowing, EventsStopped).
	watching atomic.Bool
	// giveOnce logs the first refusal to give a new file to its creator (owners.go).
	giveOnce sync.Once

	// Files created here before they are on the owner (create.go): localInos numbers them,
	// aliases maps the owner's inode number of such a file to the one the kernel knows.
	localInos atomic.Uint64
	aliasMu   sync.RWMutex
	aliases   map[uint64]uint64
}

// New builds the root of a mount; Mount serves it.
func New(opts Options) *Root {
	if opts.Blksize == 0 {
		opts.Blksize = DefaultBlksize
	}
	if opts.Inline == 0 {
		opts.Inline = DefaultInline
	}
	if opts.Readahead <= 0 {
		opts.Readahead = DefaultReadahead
	}
	if opts.KernelReadahead <= 0 {
		opts.KernelReadahead = DefaultKernelReadahead
	}
	if opts.ReadsInFlight <= 0 {
		opts.ReadsInFlight = DefaultReadsInFlight
	}
	if opts.WritesInFlight <= 0 {
		opts.WritesInFlight = DefaultWritesInFlight
	}
	if opts.Piece <= 0 || opts.Piece > wire.MaxChunk {
		opts.Piece = DefaultPiece
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stats == nil {
		opts.Stats = stats.NewSet()
	}
	r := &Root{opts: opts, owner: opts.Owner, replica: tree.New(), cache: opts.Cache, log: opts.Logger}
	if !opts.Events {
		r.replica.TTL = time.Second
	}
	r.stats = newOpStats(opts.Stats)
	if opts.Journal != nil {
		r.journal = newJournalOwner(r, opts.Owner, opts.Journal, opts.JournalWait)
		r.owner = r.journal
	}
	r.fetch = fetch.New(fetch.Options{Owner: r.owner, ReadsInFlight: opts.ReadsInFlight, Piece: opts.Piece,
		Readahead: opts.Readahead, Stats: opts.Stats})
	r.Node.root = r
	return r
}

// negativeTimeout is the longest the kernel keeps an answer that a name does not exist.
const negativeTimeout = 10 * time.Second

// Mount mounts the root at dir and returns the running server. It shows in /proc/mounts as
// fuse.peerfs with source PEER:SHARE.
func (r *Root) Mount(dir string) (*fuse.Server, error) {
	timeout := time.Second
	if r.opts.Events {
		timeout = time.Hour // invalidation is explicit
	}
	// A name found missing is kept shorter: events that a lost link made the mount miss
	// are made up for by a rescan, which can reach every name the kernel holds but not the
	// names it holds as missing. Asking again costs a lookup in the replica, no round trip.
	neg := min(timeout, negativeTimeout)
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        r.opts.Peer + ":" + r.opts.Share,
			Name:          "peerfs",
			MaxWrite:      wire.MaxChunk,
			MaxReadAhead:  wire.MaxChunk,
			MaxBackground: 64,
			DisableXAttrs: false,
			// The kernel keeps locks locally (flock, fcntl), as sshfs does.
			EnableLocks:              false,
			EnableSymlinkCaching:     r.opts.Events,
			ExplicitDataCacheControl: true,
			// Replies are built in memory, never from a file descriptor: go-fuse's splice path
			// would only fetch a pipe, fail to grow it past 1 MiB and log, on every READ.
			DisableSplice: true,
			// Setuid and setgid bits are dropped by the mount (killpriv.go), so the kernel
			// stops asking for security.capability before every write.
			//
			// READDIRPLUS_AUTO: the kernel lists with attributes (READDIRPLUS) the first
			// batch of a folder and every batch after one whose names were looked up or
			// stat'ed, and with names only otherwise. A listing that only wants names (ls -f,
			// find, a shell's completion) then makes no inode per entry here or in the kernel:
			// ls -f of a million files ran at 30,000 names/s and left 950 bytes per name in
			// this daemon with READDIRPLUS for every batch.
			ExtraCapabilities: killPrivCaps | fuse.CAP_READDIRPLUS_AUTO,
			AllowOther:        r.opts.AllowOther,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &neg,
		// Modes as the owner has them: go-fuse would show a file of mode 0000 as 0644.
		NullPermissions: true,
		UID:             r.opts.UID,
		GID:             r.opts.GID,
		Logger:          nil,
	}
	if r.opts.AllowOther {
		opts.MountOptions.Options = append(opts.MountOptions.Options, "default_permissions")
	}
	// fs.Mount, with the bridge wrapped to time each request (timing.go).
	srv, err := fuse.NewServer(&timedFS{RawFileSystem: fs.NewNodeFS(r, opts), s: r.stats}, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		r.fetch.Close()
		return nil, err
	}
	go func() {
		srv.Wait() // unmounted, by this daemon or by fusermount3 -u
		r.fetch.Close()
	}()
	r.server = srv
	if err := setKernelReadahead(dir, r.opts.KernelReadahead); err != nil {
		r.log.Info("the kernel's readahead on the mount stays at its default (128 KiB): sequential reads "+
			"reach the daemon in smaller requests", "err", err)
	}
	if r.opts.Passthrough {
		if why := probePassthrough(srv); why != "" {
			r.log.Info("FUSE passthrough unavailable: fully cached files are served through the daemon", "reason", why)
		} else {
			r.passthrough.Store(true)
		}
	}
	return srv, nil
}

// key names path p of this mount's share in the chunk cache.
func (r *Root) key(p string) cache.Key {
	return cache.Key{Peer: r.opts.Peer, Share: r.opts.Share, Path: p}
}

// Stats returns the per-operation counters of this mount.
func (r *Root) Stats() stats.Report { return r.opts.Stats.Report() }
