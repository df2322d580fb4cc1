package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

// run runs a peerfs command line against home and returns its exit status and output.
func run(t *testing.T, home string, args ...string) (exit int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	exit = execute(context.Background(), append([]string{"--home", home}, args...), &out, &errOut, false)
	return exit, out.String(), errOut.String()
}

// mustRun runs a command that must succeed.
func mustRun(t *testing.T, home string, args ...string) string {
	t.Helper()
	exit, out, errOut := run(t, home, args...)
	if exit != 0 {
		t.Fatalf("peerfs %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), exit, out, errOut)
	}
	return out
}

// decodeOne decodes stdout as exactly one JSON document.
func decodeOne(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", out)
	}
}

func newDeviceID(t *testing.T) identity.DeviceID {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id.ID
}

func TestInitAndID(t *testing.T) {
	home := t.TempDir()

	// Before init: exit 11 with a hint.
	exit, _, errOut := run(t, home, "id")
	if exit != ExitNotInitialized || !strings.Contains(errOut, "peerfs init") {
		t.Fatalf("id before init: exit %d, stderr %q", exit, errOut)
	}

	out := mustRun(t, home, "init", "--name", "alpha")
	idText := strings.TrimSpace(out)
	id, err := identity.ParseDeviceID(idText)
	if err != nil {
		t.Fatalf("init printed %q, not a device ID: %v", out, err)
	}
	if got := mustRun(t, home, "id"); got != idText+"\n" {
		t.Errorf("id printed %q, want %q", got, idText+"\n")
	}
	var j struct {
		DeviceID identity.DeviceID `json:"device_id"`
		Name     string            `json:"name"`
	}
	decodeOne(t, mustRun(t, home, "id", "--json"), &j)
	if j.DeviceID != id || j.Name != "alpha" {
		t.Errorf("id --json = %+v", j)
	}

	// Files are private.
	for _, f := range []string{"config/config.json", "config/" + identity.KeyFile} {
		fi, err := os.Stat(filepath.Join(home, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o", f, fi.Mode().Perm())
		}
	}

	// A second init refuses and keeps the identity.
	exit, out, errOut = run(t, home, "init", "--json")
	if exit != ExitError || out != "" || !strings.Contains(errOut, "already initialised") {
		t.Errorf("second init: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}
	if got := strings.TrimSpace(mustRun(t, home, "id")); got != idText {
		t.Errorf("identity changed to %s", got)
	}
}

func TestInitJSON(t *testing.T) {
	home := t.TempDir()
	var j struct {
		DeviceID  string `json:"device_id"`
		Name      string `json:"name"`
		ConfigDir string `json:"config_dir"`
	}
	exit, out, errOut := run(t, home, "init", "--json")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, errOut)
	}
	decodeOne(t, out, &j)
	host, _ := os.Hostname()
	if j.Name != host || j.ConfigDir != filepath.Join(home, "config") || j.DeviceID == "" {
		t.Errorf("init --json = %+v", j)
	}
	if errOut != "" {
		t.Errorf("init --json wrote to stderr: %q", errOut)
	}
}

func TestPeerCommands(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "alpha")
	self := strings.TrimSpace(mustRun(t, home, "id"))
	idB, idC := newDeviceID(t), newDeviceID(t)

	out := mustRun(t, home, "peer", "add", idB.String(), "--name", "beta", "--addr", "192.0.2.1:7462")
	if !strings.Contains(out, "added peer beta") {
		t.Errorf("peer add printed %q", out)
	}
	// Lower case and no dashes are accepted, as people type them.
	mustRun(t, home, "peer", "add", strings.ToLower(strings.ReplaceAll(idC.String(), "-", "")), "--name", "gamma")

	fails := []struct {
		name string
		args []string
		exit int
		msg  string
	}{
		{"duplicate name", []string{"peer", "add", newDeviceID(t).String(), "--name", "beta"}, ExitUsage, "already exists"},
		{"duplicate id", []string{"peer", "add", idB.String(), "--name", "other"}, ExitUsage, "already trusted"},
		{"own id", []string{"peer", "add", self, "--name", "me"}, ExitUsage, "own ID"},
		{"bad id", []string{"peer", "add", "NOTANID", "--name", "x"}, ExitUsage, "device ID"},
		{"no name", []string{"peer", "add", newDeviceID(t).String()}, ExitUsage, "--name"},
		{"bad name", []string{"peer", "add", newDeviceID(t).String(), "--name", "Big"}, ExitUsage, "lower-case"},
		{"bad addr", []string{"peer", "add", newDeviceID(t).String(), "--name", "x", "--addr", "nohost"}, ExitUsage, "HOST:PORT"},
		{"no args", []string{"peer", "add"}, ExitUsage, "1 argument"},
		{"unknown flag", []string{"peer", "add", "--bogus"}, ExitUsage, "bogus"},
		{"rm unknown", []string{"peer", "rm", "nobody"}, ExitUntrusted, "no peer named"},
		{"set unknown", []string{"peer", "set", "nobody", "--addr", "192.0.2.9:1"}, ExitUntrusted, "no peer named"},
		{"set bad addr", []string{"peer", "set", "beta", "--addr", "nohost"}, ExitUsage, "HOST:PORT"},
		{"set without addr", []string{"peer", "set", "beta"}, ExitUsage, "addr"},
		{"unknown subcommand", []string{"peer", "frob"}, ExitUsage, "unknown command"},
	}
	for _, f := range fails {
		t.Run(f.name, func(t *testing.T) {
			exit, out, errOut := run(t, home, f.args...)
			if exit != f.exit || !strings.Contains(errOut, f.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", exit, out, errOut, f.exit, f.msg)
			}
			if !strings.HasPrefix(errOut, "peerfs: ") {
				t.Errorf("stderr %q does not start with \"peerfs: \"", errOut)
			}
		})
	}

	out = mustRun(t, home, "peer", "ls")
	for _, want := range []string{"NAME", "beta", idB.String(), "192.0.2.1:7462", "gamma", idC.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("peer ls lacks %q:\n%s", want, out)
		}
	}
	var ls struct {
		Peers []struct {
			Name      string            `json:"name"`
			DeviceID  identity.DeviceID `json:"device_id"`
			Addr      string            `json:"addr"`
			Connected *bool             `json:"connected"`
		} `json:"peers"`
		DaemonRunning bool `json:"daemon_running"`
	}
	decodeOne(t, mustRun(t, home, "peer", "ls", "--json"), &ls)
	if len(ls.Peers) != 2 || ls.Peers[0].Name != "beta" || ls.Peers[0].DeviceID != idB || ls.Peers[0].Connected != nil || ls.DaemonRunning {
		t.Errorf("peer ls --json = %+v", ls)
	}

	// peer set changes the address and keeps the peer in its shares; "" removes it.
	mustRun(t, home, "share", "add", "kept", t.TempDir(), "--peer", "gamma")
	if out := mustRun(t, home, "peer", "set", "gamma", "--addr", "192.0.2.7:7000"); !strings.Contains(out, "192.0.2.7:7000") {
		t.Errorf("peer set printed %q", out)
	}
	if out := mustRun(t, home, "peer", "ls"); !strings.Contains(out, "192.0.2.7:7000") {
		t.Errorf("peer ls after set:\n%s", out)
	}
	mustRun(t, home, "peer", "set", "gamma", "--addr", "")
	if out := mustRun(t, home, "peer", "ls"); strings.Contains(out, "192.0.2.7:7000") {
		t.Errorf("peer set --addr \"\" kept the address:\n%s", out)
	}
	if out := mustRun(t, home, "share", "ls"); !strings.Contains(out, "gamma") {
		t.Errorf("peer set dropped the peer from its share:\n%s", out)
	}
	mustRun(t, home, "share", "rm", "kept")

	// Removing a peer removes it from the shares that named it.
	mustRun(t, home, "share", "add", "docs", t.TempDir(), "--peer", "beta,gamma")
	var rm struct {
		Removed struct {
			Name string `json:"name"`
		} `json:"removed"`
		SharesUpdated []string `json:"shares_updated"`
	}
	decodeOne(t, mustRun(t, home, "peer", "rm", "beta", "--json"), &rm)
	if rm.Removed.Name != "beta" || len(rm.SharesUpdated) != 1 || rm.SharesUpdated[0] != "docs" {
		t.Errorf("peer rm --json = %+v", rm)
	}
	p, _ := config.ResolvePaths(home)
	f, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Peers) != 1 || f.Peers[0].Name != "gamma" || len(f.Shares[0].Peers) != 1 || f.Shares[0].Peers[0] != "gamma" {
		t.Errorf("config after peer rm: %+v", f)
	}
}

func TestShareCommands(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "alpha")
	mustRun(t, home, "peer", "add", newDeviceID(t).String(), "--name", "beta")
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o600)

	// A relative path is made absolute.
	t.Chdir(dir)
	out := mustRun(t, home, "share", "add", "proj", ".", "--peer", "beta", "--read-only")
	if !strings.Contains(out, "added share proj") || !strings.Contains(out, dir) {
		t.Errorf("share add printed %q", out)
	}

	fails := []struct {
		name string
		args []string
		exit int
		msg  string
	}{
		{"duplicate", []string{"share", "add", "proj", dir}, ExitUsage, "already exists"},
		{"missing dir", []string{"share", "add", "x", filepath.Join(dir, "nope")}, ExitNotFound, "no such file"},
		{"not a dir", []string{"share", "add", "x", file}, ExitUsage, "not a directory"},
		{"bad name", []string{"share", "add", ".x", dir}, ExitUsage, "not start with '.'"},
		{"unknown peer", []string{"share", "add", "x", dir, "--peer", "ghost"}, ExitUntrusted, "no such peer"},
		{"rm unknown", []string{"share", "rm", "nope"}, ExitNotFound, "no share named"},
		{"one arg", []string{"share", "add", "x"}, ExitUsage, "2 arguments"},
	}
	for _, f := range fails {
		t.Run(f.name, func(t *testing.T) {
			exit, out, errOut := run(t, home, f.args...)
			if exit != f.exit || !strings.Contains(errOut, f.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", exit, out, errOut, f.exit, f.msg)
			}
		})
	}

	out = mustRun(t, home, "share", "ls")
	for _, want := range []string{"proj", "read-only", dir, "beta"} {
		if !strings.Contains(out, want) {
			t.Errorf("share ls lacks %q:\n%s", want, out)
		}
	}
	var ls struct {
		Shares []struct {
			Name     string   `json:"name"`
			Path     string   `json:"path"`
			ReadOnly bool     `json:"read_only"`
			Peers    []string `json:"peers"`
		} `json:"shares"`
	}
	decodeOne(t, mustRun(t, home, "share", "ls", "--json"), &ls)
	if len(ls.Shares) != 1 || ls.Shares[0].Path != dir || !ls.Shares[0].ReadOnly || len(ls.Shares[0].Peers) != 1 {
		t.Errorf("share ls --json = %+v", ls)
	}

	mustRun(t, home, "share", "rm", "proj")
	// --allow-hardlinks is kept in the config and shown by ls.
	mustRun(t, home, "share", "add", "linked", dir, "--peer", "beta", "--allow-hardlinks")
	if out := mustRun(t, home, "share", "ls"); !strings.Contains(out, "read-write,hardlinks") {
		t.Errorf("share ls does not show --allow-hardlinks:\n%s", out)
	}
	var linked struct {
		Shares []struct {
			AllowHardlinks bool `json:"allow_hardlinks"`
		} `json:"shares"`
	}
	decodeOne(t, mustRun(t, home, "share", "ls", "--json"), &linked)
	if len(linked.Shares) != 1 || !linked.Shares[0].AllowHardlinks {
		t.Errorf("share ls --json = %+v, want allow_hardlinks", linked)
	}
	mustRun(t, home, "share", "rm", "linked")
	decodeOne(t, mustRun(t, home, "share", "ls", "--json"), &ls)
	if len(ls.Shares) != 0 {
		t.Errorf("shares after rm: %+v", ls)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("share rm touched the folder: %v", err)
	}
}

func TestJSONError(t *testing.T) {
	home := t.TempDir()
	exit, out, errOut := run(t, home, "--json", "peer", "ls")
	if exit != ExitNotInitialized || out != "" {
		t.Fatalf("exit %d, stdout %q", exit, out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "peerfs: ") {
		t.Fatalf("stderr %q: want a message line and a JSON line", errOut)
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Type != "error" || e.Error.Code != codeNotInitialized || e.ExitCode != ExitNotInitialized || !strings.Contains(e.Error.Message, "peerfs init") {
		t.Errorf("error object %+v", e)
	}
}

func TestNoDaemon(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init")
	for _, args := range [][]string{{"status"}, {"ls", "beta"}, {"pull", "beta:s/x"}} {
		exit, _, errOut := run(t, home, args...)
		if exit != ExitNoDaemon || !strings.Contains(errOut, `start it with "peerfs daemon"`) {
			t.Errorf("%v: exit %d, stderr %q", args, exit, errOut)
		}
	}
}

func TestUsage(t *testing.T) {
	home := t.TempDir()
	cases := [][]string{
		{"frobnicate"},
		{"--bogus"},
		{"id", "extra"},
		{"pull"},
		{"pull", "a:b", "c", "d"},
		{"send", "x"},
		{"ls", "Bad:x"},
		{"daemon", "--listen", "nonsense"},
		{"daemon", "--metrics", "nonsense"},
		{"daemon", "--metrics", "0.0.0.0:7463"},
		{"daemon", "--metrics", ":7463"},
	}
	for _, args := range cases {
		exit, out, errOut := run(t, home, args...)
		if exit != ExitUsage || out != "" || !strings.HasPrefix(errOut, "peerfs: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, exit, out, errOut)
		}
	}
}

// TestDaemonMetricsPublic: --metrics-public lets a public --metrics address past the
// check (this home has no identity, so the daemon then stops before listening).
func TestDaemonMetricsPublic(t *testing.T) {
	exit, _, errOut := run(t, t.TempDir(), "daemon", "--metrics", "0.0.0.0:7463", "--metrics-public")
	if exit == ExitUsage || !strings.Contains(errOut, "peerfs init") {
		t.Errorf("exit %d, stderr %q: want the missing identity reported", exit, errOut)
	}
	exit, _, errOut = run(t, t.TempDir(), "daemon", "--metrics", "0.0.0.0:7463")
	if !strings.Contains(errOut, "--metrics-public") || !strings.Contains(errOut, "127.0.0.1:7463") {
		t.Errorf("exit %d, stderr %q: want the refusal to say how to proceed", exit, errOut)
	}
}

func TestHelpEndsWithExitStatus(t *testing.T) {
	leaves := [][]string{{"init"}, {"id"}, {"daemon"}, {"peer", "add"}, {"peer", "ls"}, {"peer", "rm"},
		{"share", "add"}, {"share", "ls"}, {"share", "rm"}, {"ls"}, {"pull"}, {"send"}, {"status"}}
	for _, leaf := range leaves {
		out := mustRun(t, t.TempDir(), append(leaf, "--help")...)
		if !strings.HasSuffix(out, exitStatusHelp) || !strings.Contains(out, "docs/CLI.md") {
			t.Errorf("help of %v does not end with the exit status:\n%s", leaf, out)
		}
	}
	// Groups list their commands instead.
	out := mustRun(t, t.TempDir(), "peer")
	if !strings.Contains(out, "add") || strings.Contains(out, "Exit status") {
		t.Errorf("peer help:\n%s", out)
	}
}

// fakeDaemon serves b on the control socket of home until the test ends.
func fakeDaemon(t *testing.T, home string, b api.Backend) {
	t.Helper()
	p, err := config.ResolvePaths(home)
	if err != nil {
		t.Fatal(err)
	}
	l, err := api.Listen(p.Socket())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		api.Serve(ctx, l, b, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// backend is a fake daemon backend that records what it was asked.
type backend struct {
	status  api.StatusResult
	list    *api.ListResult
	reloads int
	pulls   []api.PullParams
	sends   []api.SendParams
	lists   []api.ListParams

	mountsMade []api.MountParams
}

func (b *backend) Status(ctx context.Context) (*api.StatusResult, error) { return &b.status, nil }
func (b *backend) Reload(ctx context.Context) error                      { b.reloads++; return nil }
func (b *backend) List(ctx context.Context, p api.ListParams) (*api.ListResult, error) {
	b.lists = append(b.lists, p)
	if p.Peer == "nobody" {
		return nil, api.Errorf(api.CodeUnknownPeer, "no peer named %q", p.Peer)
	}
	return b.list, nil
}
func (b *backend) Pull(ctx context.Context, p api.PullParams, emit func(api.Event)) (*api.TransferResult, error) {
	b.pulls = append(b.pulls, p)
	emit(api.Event{Type: "start", Path: "x"})
	emit(api.Event{Type: "progress", Files: 2, FilesDone: 1, Bytes: 100, TotalBytes: 300})
	emit(api.Event{Type: "error", Path: "x/bad", Error: api.Errorf(api.CodePermission, "permission denied")})
	emit(api.Event{Type: "done", Files: 2, FilesDone: 2, Bytes: 300, TotalBytes: 300})
	return &api.TransferResult{Source: "beta:docs/x", Dest: filepath.Join(p.Dest, "x"), Files: 2, Bytes: 300, TotalBytes: 300, Elapsed: 0.5, Rate: 600}, nil
}
func (b *backend) Send(ctx context.Context, p api.SendParams, emit func(api.Event)) (*api.TransferResult, error) {
	b.sends = append(b.sends, p)
	return nil, api.Errorf(api.CodePermission, "share %s is read-only for this device", p.Share)
}
func (b *backend) Mount(ctx context.Context, p api.MountParams) (*api.MountInfo, error) {
	b.mountsMade = append(b.mountsMade, p)
	return &api.MountInfo{Peer: p.Peer, Share: p.Share, Dir: p.Dir}, nil
}
func (b *backend) Unmount(ctx context.Context, p api.UnmountParams) error { return nil }
func (b *backend) Mounts(ctx context.Context) (*api.MountsResult, error) {
	return &api.MountsResult{Mounts: []api.MountInfo{}}, nil
}
func (b *backend) Stats(ctx context.Context, p api.UnmountParams) (*api.StatsResult, error) {
	return &api.StatsResult{Ops: []api.OpStats{{Name: "write", Calls: 2, Bytes: 2 << 20, Min: 1 << 20, Avg: 1 << 20, Max: 1 << 20}},
		Counters: map[string]int64{"round_trips": 3}}, nil
}

func TestWithDaemon(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "alpha")
	idB := newDeviceID(t)
	now := time.Now()
	b := &backend{
		status: api.StatusResult{Name: "alpha", Listen: "[::]:7462", Peers: []api.PeerStatus{
			{Name: "beta", DeviceID: idB, Connected: true, Transfers: []api.TransferStatus{}}}},
		list: &api.ListResult{Entries: []api.Entry{
			{Name: "a.txt", Type: "file", Mode: 0o100644, Size: 5, Mtime: now, Nlink: 1, UID: 1000, GID: 1000}}},
	}
	fakeDaemon(t, home, b)

	// Config edits reload the daemon.
	var add struct {
		DaemonReloaded bool `json:"daemon_reloaded"`
	}
	decodeOne(t, mustRun(t, home, "peer", "add", idB.String(), "--name", "beta", "--json"), &add)
	if !add.DaemonReloaded || b.reloads != 1 {
		t.Errorf("peer add: reloaded %v, %d reloads", add.DaemonReloaded, b.reloads)
	}
	mustRun(t, home, "share", "add", "docs", t.TempDir(), "--peer", "beta")
	if b.reloads != 2 {
		t.Errorf("%d reloads after share add", b.reloads)
	}

	// peer ls shows the connection state.
	out := mustRun(t, home, "peer", "ls")
	if !strings.Contains(out, "connected") || strings.Contains(out, "not connected") {
		t.Errorf("peer ls:\n%s", out)
	}

	// status
	var st api.StatusResult
	decodeOne(t, mustRun(t, home, "status", "--json"), &st)
	if st.Name != "alpha" || len(st.Peers) != 1 || !st.Peers[0].Connected {
		t.Errorf("status --json = %+v", st)
	}
	if out := mustRun(t, home, "status"); !strings.Contains(out, "peer beta") {
		t.Errorf("status:\n%s", out)
	}

	// ls
	out = mustRun(t, home, "ls", "beta:docs//sub/")
	if !strings.HasPrefix(out, "-rw-r--r-- 1 1000 1000 5 ") || !strings.HasSuffix(out, " a.txt\n") {
		t.Errorf("ls printed %q", out)
	}
	if got := b.lists[len(b.lists)-1]; got != (api.ListParams{Peer: "beta", Share: "docs", Path: "sub"}) {
		t.Errorf("ls sent %+v", got)
	}
	var lr api.ListResult
	decodeOne(t, mustRun(t, home, "ls", "beta:docs", "--json"), &lr)
	if len(lr.Entries) != 1 || lr.Entries[0].Name != "a.txt" {
		t.Errorf("ls --json = %+v", lr)
	}
	if exit, _, errOut := run(t, home, "ls", "nobody:"); exit != ExitUntrusted || !strings.Contains(errOut, "no peer named") {
		t.Errorf("ls nobody: exit %d, %q", exit, errOut)
	}

	// pull, text: summary on stdout, per-file errors on stderr, DEST made absolute.
	dest := t.TempDir()
	t.Chdir(dest)
	exit, out, errOut := run(t, home, "pull", "beta:docs/x")
	if exit != 0 {
		t.Fatalf("pull: exit %d, %s", exit, errOut)
	}
	if want := "pulled 2 files (300 B) to " + filepath.Join(dest, "x") + " in 0.50 s, 600.0 B/s (resumed 0 B, skipped 0)\n"; out != want {
		t.Errorf("pull printed %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "x/bad: permission denied") {
		t.Errorf("pull stderr %q lacks the per-file error", errOut)
	}
	if got := b.pulls[0]; got.Dest != dest || got.Peer != "beta" || got.Share != "docs" || got.Path != "x" {
		t.Errorf("pull sent %+v", got)
	}

	// pull, JSON: one line per event, then one done line with the result.
	exit, out, _ = run(t, home, "pull", "beta:docs/x", "rel", "--json")
	if exit != 0 {
		t.Fatalf("pull --json: exit %d", exit)
	}
	if got := b.pulls[1].Dest; got != filepath.Join(dest, "rel") {
		t.Errorf("pull --json sent dest %q", got)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		types = append(types, m["type"].(string))
		if m["type"] == "done" && (m["files"] != 2.0 || m["total_bytes"] != 300.0 || m["dest"] == nil) {
			t.Errorf("done line %q lacks the result", line)
		}
	}
	if got := strings.Join(types, ","); got != "start,progress,error,done" {
		t.Errorf("pull --json line types %s", got)
	}

	// send: the daemon's error code becomes the exit status.
	src := filepath.Join(dest, "file")
	os.WriteFile(src, []byte("data"), 0o600)
	exit, _, errOut = run(t, home, "send", "file", "beta:docs/in")
	if exit != ExitPermission || !strings.Contains(errOut, "read-only") {
		t.Errorf("send: exit %d, %q", exit, errOut)
	}
	if got := b.sends[0]; got.Source != src || got.Dir != "in" || got.Share != "docs" {
		t.Errorf("send sent %+v", got)
	}
	if exit, _, _ := run(t, home, "send", "missing", "beta:docs"); exit != ExitNotFound {
		t.Errorf("send of a missing file: exit %d", exit)
	}
}

// TestMountIdmapFlag: --idmap takes user or none, and a wrong value is a usage error that
// names the choices, before any daemon is asked.
func TestMountIdmapFlag(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "alpha")
	exit, out, errOut := run(t, home, "mount", "--idmap", "root", "beta:s", t.TempDir())
	if exit != ExitUsage || !strings.Contains(errOut, "--idmap") || !strings.Contains(errOut, "none") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want a usage error naming --idmap's choices", exit, out, errOut)
	}
}
