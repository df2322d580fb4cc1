package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// fakeBackend answers from its fields; tests set what they need.
type fakeBackend struct {
	status  *StatusResult
	listErr error
	pull    func(ctx context.Context, p PullParams, emit func(Event)) (*TransferResult, error)
	reloads chan struct{}
}

func (f *fakeBackend) Status(ctx context.Context) (*StatusResult, error) { return f.status, nil }
func (f *fakeBackend) Reload(ctx context.Context) error {
	if f.reloads != nil {
		f.reloads <- struct{}{}
	}
	return nil
}
func (f *fakeBackend) List(ctx context.Context, p ListParams) (*ListResult, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return &ListResult{Entries: []Entry{{Name: p.Peer + ":" + p.Share + "/" + p.Path, Type: "file", Size: 3}}}, nil
}
func (f *fakeBackend) Pull(ctx context.Context, p PullParams, emit func(Event)) (*TransferResult, error) {
	return f.pull(ctx, p, emit)
}
func (f *fakeBackend) Send(ctx context.Context, p SendParams, emit func(Event)) (*TransferResult, error) {
	return &TransferResult{Source: p.Source, Dest: p.Peer + ":" + p.Share}, nil
}

func (f *fakeBackend) Mount(ctx context.Context, p MountParams) (*MountInfo, error) {
	return &MountInfo{Peer: p.Peer, Share: p.Share, Dir: p.Dir}, nil
}
func (f *fakeBackend) Unmount(ctx context.Context, p UnmountParams) error { return nil }
func (f *fakeBackend) Mounts(ctx context.Context) (*MountsResult, error) {
	return &MountsResult{Mounts: []MountInfo{}}, nil
}
func (f *fakeBackend) Stats(ctx context.Context, p UnmountParams) (*StatsResult, error) {
	return &StatsResult{}, nil
}

// serve starts a server for b on a socket in a temporary directory and returns the socket.
func serve(t *testing.T, b Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "peerfs.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, b, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket still there after Serve returned: %v", err)
		}
	})
	return sock
}

func call(t *testing.T, sock, method string, params, result any, onEvent func(Event)) error {
	t.Helper()
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Call(ctx, method, params, result, onEvent)
}

func TestStatusAndList(t *testing.T) {
	want := &StatusResult{DeviceID: identity.DeviceID{7}, Name: "laptop", Listen: "[::]:7462",
		Peers: []PeerStatus{{Name: "desktop", Connected: true, RTTMicros: 420, Transfers: []TransferStatus{}}}}
	sock := serve(t, &fakeBackend{status: want})

	var got StatusResult
	if err := call(t, sock, MethodStatus, nil, &got, nil); err != nil {
		t.Fatal(err)
	}
	if got.DeviceID != want.DeviceID || got.Name != "laptop" || len(got.Peers) != 1 || got.Peers[0].RTTMicros != 420 {
		t.Errorf("status = %+v", got)
	}

	var ls ListResult
	if err := call(t, sock, MethodList, ListParams{Peer: "p", Share: "s", Path: "a/b"}, &ls, nil); err != nil {
		t.Fatal(err)
	}
	if len(ls.Entries) != 1 || ls.Entries[0].Name != "p:s/a/b" {
		t.Errorf("ls = %+v", ls)
	}

	if err := call(t, sock, MethodReload, nil, nil, nil); err != nil {
		t.Errorf("reload: %v", err)
	}
}

func TestErrorCodes(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantCode string
		wantMsg  string
	}{
		{"api error", Errorf(CodeNotFound, "no such file %q", "x"), CodeNotFound, `no such file "x"`},
		{"wrapped api error", fmt.Errorf("listing: %w", Errorf(CodeUntrusted, "peer refused us")), CodeUntrusted, "peer refused us"},
		{"plain error", errors.New("boom"), CodeInternal, "boom"},
		{"canceled", fmt.Errorf("walking: %w", context.Canceled), CodeCanceled, "canceled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := serve(t, &fakeBackend{listErr: tc.err})
			err := call(t, sock, MethodList, ListParams{Peer: "p"}, &ListResult{}, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want *Error", err, err)
			}
			if e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
				t.Errorf("got %q %q, want %q containing %q", e.Code, e.Message, tc.wantCode, tc.wantMsg)
			}
			if CodeOf(err) != tc.wantCode {
				t.Errorf("CodeOf = %q", CodeOf(err))
			}
		})
	}
}

// rawCall sends line as is and returns the daemon's lines.
func rawCall(t *testing.T, sock, line string) []Line {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	var out []Line
	dec := json.NewDecoder(conn)
	for {
		var l Line
		if err := dec.Decode(&l); err != nil {
			return out
		}
		out = append(out, l)
	}
}

func TestBadRequests(t *testing.T) {
	sock := serve(t, &fakeBackend{})
	cases := []struct {
		name, line, match string
	}{
		{"not json", "hello\n", "not valid JSON"},
		{"wrong version", `{"api":99,"method":"status"}` + "\n", "API version 99"},
		{"unknown method", `{"api":1,"method":"format-disk"}` + "\n", "unknown method"},
		{"missing params", `{"api":1,"method":"ls"}` + "\n", "needs params"},
		{"bad params", `{"api":1,"method":"pull","params":{"peer":3}}` + "\n", "params"},
		{"too long", `{"api":1,"method":"status","params":"` + strings.Repeat("x", MaxRequestLen) + "\"}\n", "longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := rawCall(t, sock, tc.line)
			if len(lines) != 1 || lines[0].Type != "error" || lines[0].Error == nil {
				t.Fatalf("got %+v, want one error line", lines)
			}
			if lines[0].Error.Code != CodeInvalid || !strings.Contains(lines[0].Error.Message, tc.match) {
				t.Errorf("got %+v, want invalid mentioning %q", lines[0].Error, tc.match)
			}
		})
	}
}

func TestUnknownParamFieldsIgnored(t *testing.T) {
	sock := serve(t, &fakeBackend{})
	lines := rawCall(t, sock, `{"api":1,"method":"ls","params":{"peer":"p","share":"s","future_field":true}}`+"\n")
	if len(lines) != 1 || lines[0].Type != "result" {
		t.Fatalf("got %+v, want one result line", lines)
	}
}

func TestEventsInOrder(t *testing.T) {
	const n = 500
	b := &fakeBackend{pull: func(ctx context.Context, p PullParams, emit func(Event)) (*TransferResult, error) {
		emit(Event{Type: "start"})
		for i := 1; i <= n; i++ {
			typ := "progress"
			if i%10 == 0 {
				typ = "error" // per-file errors are never dropped
			}
			emit(Event{Type: typ, Bytes: int64(i)})
		}
		return &TransferResult{Dest: p.Dest, Files: 3, Bytes: n}, nil
	}}
	sock := serve(t, b)

	var events []Event
	var res TransferResult
	err := call(t, sock, MethodPull, PullParams{Peer: "p", Share: "s", Dest: "/d"}, &res, func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Dest != "/d" || res.Files != 3 || res.Bytes != n {
		t.Errorf("result = %+v", res)
	}
	if len(events) == 0 || events[0].Type != "start" {
		t.Fatalf("first event %+v, want start", events)
	}
	var last int64
	errs := 0
	for _, e := range events[1:] {
		if e.Bytes <= last {
			t.Fatalf("event %d after %d: out of order", e.Bytes, last)
		}
		last = e.Bytes
		if e.Type == "error" {
			errs++
		}
	}
	if errs != n/10 {
		t.Errorf("%d error events arrived, want %d", errs, n/10)
	}
}

func TestCancelOnDisconnect(t *testing.T) {
	started := make(chan struct{})
	canceled := make(chan struct{})
	b := &fakeBackend{pull: func(ctx context.Context, p PullParams, emit func(Event)) (*TransferResult, error) {
		emit(Event{Type: "start"})
		close(started)
		select {
		case <-ctx.Done():
			close(canceled)
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("not canceled")
		}
	}}
	sock := serve(t, b)

	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	err = c.Call(ctx, MethodPull, PullParams{Peer: "p", Share: "s", Dest: "/d"}, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Call: got %v, want context.Canceled", err)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's ctx was not canceled after the client left")
	}
}

func TestDialNoDaemon(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	_, err := Dial(missing)
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), `"peerfs daemon"`) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing socket: got %v", err)
	}

	stale := filepath.Join(dir, "stale.sock")
	makeStale(t, stale)
	if _, err := Dial(stale); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("stale socket: got %v, want ErrNoDaemon", err)
	}
}

// makeStale leaves a socket file nobody listens on, as a killed daemon does.
func makeStale(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
}

func TestListen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "peerfs.sock")
	makeStale(t, sock)

	l, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("runtime dir mode %04o, want 0700", di.Mode().Perm())
	}

	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Listen: got %v, want already running", err)
	}

	l.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
	l2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	l2.Close()
}

func TestListenRefusesLiveForeignSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "peerfs.sock")
	other, err := net.Listen("unix", sock) // a daemon that holds no lock
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("got %v, want already running", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "peerfs.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("got %v, want not a socket", err)
	}
}
