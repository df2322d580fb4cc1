// Package transfer is direct mode: it copies whole files and trees between this device and a
// peer's share (pull and send) at line rate, resumably, verified end to end.
//
// Every file travels as one credit-controlled stream (GET or PUT) with many bytes in flight, is
// written under a temporary ".NAME.peerfs-part" name beside its final name, and is renamed into
// place only after the BLAKE3 hash of the whole file matches the owner's; it counts as done once
// its data and its directory are synced (the owner does the same before it acknowledges a send),
// so a file reported copied survives a power cut. Room for a file is reserved before its bytes
// move and refused at once if the disk lacks it. An interrupted run
// leaves the part file; the next run resumes from its length (rehashing the prefix), and falls
// back to a fresh copy once if the resumed result does not verify. Trees keep modes and mtimes;
// symlinks are recreated as links and never followed. On the local side every path is resolved
// through os.Root, so a hostile tree cannot make a pull write outside its destination.
package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sync/errgroup"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// Tuning constants.
const (
	// DefaultConcurrency is how many files move at once in a tree: enough to hide the round trip
	// of each small file's stream set-up; a single large file fills the link on its own.
	DefaultConcurrency = 16
	// progressEvery is how often OnProgress is called during a transfer.
	progressEvery = 200 * time.Millisecond
)

// queuedFiles is how many files a tree's walk may find ahead of the workers copying them.
const queuedFiles = 256

// inParallel runs walk, which passes the files of a tree it finds to jobs, beside workers
// goroutines that take each and copy it with copyOne, until the walk has ended and every
// file is copied, or the first error, which cancels the ctx both were given and is returned.
func inParallel[J any](ctx context.Context, workers int,
	walk func(ctx context.Context, jobs chan<- J) error, copyOne func(ctx context.Context, j J) error) error {
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan J, queuedFiles)
	for range workers {
		g.Go(func() error {
			for j := range jobs {
				if err := copyOne(ctx, j); err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(jobs)
		return walk(ctx, jobs)
	})
	return g.Wait()
}

// copyFile copies one file with once (resume: keep a part file's bytes), unless same says the
// destination holds it already, and starts over once if a resumed copy does not verify. name
// is what progress shows and errors say. It returns the file's hash, nil for a skipped file.
func (c *counters) copyFile(name string, same bool, once func(resume bool) ([]byte, error)) ([]byte, error) {
	if same {
		c.skips.Add(1)
		c.filesDone.Add(1)
		return nil, nil
	}
	c.current.Store(name)
	sum, err := once(true)
	if errors.Is(err, errRetryFresh) {
		sum, err = once(false)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.filesDone.Add(1)
	return sum, nil
}

// Errors callers branch on.
var (
	// ErrHashMismatch: the received content does not hash to what the sender computed.
	ErrHashMismatch = errors.New("content hash mismatch")
	// ErrChanged: the source changed while it was being copied.
	ErrChanged = errors.New("source changed during the transfer")
)

// Options tune a transfer.
type Options struct {
	Concurrency int            // files in flight; 0 means DefaultConcurrency
	Window      uint32         // stream credit in bytes; 0 means rpc.DefaultWindow
	OnProgress  func(Progress) // called every progressEvery and at the end; may be nil
	Logger      *slog.Logger   // nil discards
}

// Progress is a snapshot of a running transfer.
type Progress struct {
	Files      int    // files found so far
	FilesDone  int    // files complete (copied, skipped or verified)
	Bytes      int64  // bytes moved over the link
	TotalBytes int64  // bytes of all files found so far
	Resumed    int64  // bytes kept from earlier interrupted runs
	Path       string // a file in progress
	Elapsed    time.Duration
}

// Result summarises a finished transfer.
type Result struct {
	Dest       string
	Files      int
	Dirs       int
	Symlinks   int
	Skipped    int // already present with the same size and mtime
	Bytes      int64
	TotalBytes int64
	Resumed    int64
	Elapsed    time.Duration
	Hash       []byte // BLAKE3 of the file, when a single file was copied
}

// counters are shared by a transfer's goroutines.
type counters struct {
	start                 time.Time
	files, filesDone      atomic.Int64
	dirs, symlinks, skips atomic.Int64
	bytes, total, resumed atomic.Int64
	current               atomic.Value // string
}

func newCounters() *counters {
	c := &counters{start: time.Now()}
	c.current.Store("")
	return c
}

func (c *counters) progress() Progress {
	return Progress{
		Files: int(c.files.Load()), FilesDone: int(c.filesDone.Load()),
		Bytes: c.bytes.Load(), TotalBytes: c.total.Load(), Resumed: c.resumed.Load(),
		Path: c.current.Load().(string), Elapsed: time.Since(c.start),
	}
}

func (c *counters) result(dest string) *Result {
	return &Result{
		Dest: dest, Files: int(c.files.Load()), Dirs: int(c.dirs.Load()), Symlinks: int(c.symlinks.Load()),
		Skipped: int(c.skips.Load()), Bytes: c.bytes.Load(), TotalBytes: c.total.Load(),
		Resumed: c.resumed.Load(), Elapsed: time.Since(c.start),
	}
}

// report calls fn every progressEvery until stop is called, and once more at the end.
func (c *counters) report(fn func(Progress)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				fn(c.progress())
				return
			case <-t.C:
				fn(c.progress())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (o *Options) defaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Window == 0 {
		o.Window = rpc.DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// hashPrefix feeds the first n bytes of f into h: the part of a file that an earlier run
// already copied, so the final hash covers the whole file.
func hashPrefix(f *os.File, n int64, h *blake3.Hasher) error {
	if n == 0 {
		return nil
	}
	buf := make([]byte, 1<<20)
	_, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, n), buf)
	return err
}

// remoteErrno returns the wire code of a peer's ERROR in err, or 0.
func remoteErrno(err error) wire.Errno {
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}
