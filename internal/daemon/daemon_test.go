//go:build unix

package daemon

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

// initHome creates an identity and an empty config in a temporary home.
func initHome(t *testing.T) (config.Paths, *identity.Identity) {
	t.Helper()
	p, err := config.ResolvePaths(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Save(p.IdentityDir()); err != nil {
		t.Fatal(err)
	}
	if err := config.Create(p, &config.File{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	return p, id
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// status calls the daemon, retrying until it answers.
func status(t *testing.T, p config.Paths) *api.StatusResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := api.Dial(p.Socket())
		if err == nil {
			var st api.StatusResult
			err = c.Call(context.Background(), api.MethodStatus, nil, &st, nil)
			c.Close()
			if err == nil {
				return &st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRun(t *testing.T) {
	p, id := initHome(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Paths: p, Listen: "127.0.0.1:0", Logger: log}) }()

	st := status(t, p)
	if st.DeviceID != id.ID || st.Name != "test" || !strings.HasPrefix(st.Listen, "127.0.0.1:") {
		t.Errorf("status = %+v", st)
	}
	if !strings.Contains(logs.String(), "peerfs daemon: device "+id.ID.String()+" listening on 127.0.0.1:") ||
		!strings.Contains(logs.String(), "control socket "+p.Socket()) {
		t.Errorf("start line missing from the log:\n%s", logs.String())
	}

	// A second daemon for the same home is refused.
	err := Run(context.Background(), Options{Paths: p, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run: got %v, want already running", err)
	}

	// SIGHUP reloads the config. Run has registered for it: it answered a call.
	peerID := identity.DeviceID{42}
	if err := config.Update(p, func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: "beta", ID: peerID, Addr: "127.0.0.1:1"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := status(t, p)
		if len(st.Peers) == 1 && st.Peers[0].DeviceID == peerID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer not in status after SIGHUP: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v on a clean stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := os.Lstat(p.Socket()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left after Run: %v", err)
	}
}

func TestRunNotInitialised(t *testing.T) {
	p, err := config.ResolvePaths(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Options{Paths: p, Listen: "127.0.0.1:0"})
	if !errors.Is(err, identity.ErrNoIdentity) || !strings.Contains(err.Error(), "peerfs init") {
		t.Errorf("got %v, want ErrNoIdentity saying to run peerfs init", err)
	}
	if _, err := os.Lstat(p.Socket()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket created without an identity: %v", err)
	}
}

func TestMountForegroundRefusals(t *testing.T) {
	p, err := config.ResolvePaths(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = Mount(context.Background(), MountOptions{Paths: p, Mount: api.MountParams{Peer: "a", Share: "s", Dir: dir}})
	if !errors.Is(err, identity.ErrNoIdentity) {
		t.Errorf("without an identity: %v", err)
	}

	p, _ = initHome(t)
	err = Mount(context.Background(), MountOptions{Paths: p, Mount: api.MountParams{Peer: "a", Share: "s", Dir: "rel"}})
	if api.CodeOf(err) != api.CodeInvalid {
		t.Errorf("relative mount point: %v", err)
	}
	// Another foreground mount answers on the mount point's socket.
	l, err := api.Listen(p.MountSocket(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go api.Serve(ctx, l, nil, nil)
	err = Mount(context.Background(), MountOptions{Paths: p, Mount: api.MountParams{Peer: "a", Share: "s", Dir: dir}})
	if api.CodeOf(err) != api.CodeInvalid || !strings.Contains(err.Error(), "already served") {
		t.Errorf("mount point served by another foreground mount: %v", err)
	}
}
