package cache

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pattern returns the test contents of bytes [off, off+n) of every cached file: a sequence
// that differs at every offset within a chunk and from chunk to chunk.
func pattern(off, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		o := off + int64(i)
		b[i] = byte(o%251) ^ byte(o>>chunkShift)
	}
	return b
}

// logBuffer collects log output from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSpace(l.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// openStore opens a Store on dir, logging at Info and above into the returned buffer, and
// closes it at the end of the test unless the test did.
func openStore(t *testing.T, dir string, limit int64) (*Store, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, err := Open(Options{
		Dir:    dir,
		Limit:  limit,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func get(t *testing.T, s *Store, k Key, v Version) *File {
	t.Helper()
	f, err := s.Get(k, v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeChunks writes whole chunks of the test pattern, each in one WriteAt.
func writeChunks(t *testing.T, f *File, chunks ...int64) {
	t.Helper()
	size := f.Version().Size
	for _, c := range chunks {
		off := c << chunkShift
		n := min(int64(ChunkSize), size-off)
		if _, err := f.WriteAt(pattern(off, n), off); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRead reads [off, off+n) through ReadAt and compares it with the pattern.
func checkRead(t *testing.T, f *File, off, n int64) {
	t.Helper()
	got := make([]byte, n)
	m, err := f.ReadAt(got, off)
	if err != nil && err != io.EOF {
		t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
	}
	if !bytes.Equal(got[:m], pattern(off, int64(m))) {
		t.Fatalf("ReadAt(%d, %d): wrong bytes", off, n)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// copyDir copies a cache directory as a crash would leave it: whatever the files hold now.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
