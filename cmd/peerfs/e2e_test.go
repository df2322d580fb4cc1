package main_test

// End-to-end test of the built binary as a user drives it: two daemons on loopback, the CLI
// for everything, text and JSON output, and the documented exit codes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "peerfs-e2e-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "peerfs")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic("building peerfs: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// peerfs runs the CLI for home and returns stdout, stderr and the exit code.
func peerfs(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func must(t *testing.T, home string, args ...string) string {
	t.Helper()
	out, errs, code := peerfs(t, home, args...)
	if code != 0 {
		t.Fatalf("peerfs %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func startDaemon(t *testing.T, home string) string {
	t.Helper()
	return startDaemonProcess(t, home).addr
}

// daemonProcess is a daemon started by a test.
type daemonProcess struct {
	cmd    *exec.Cmd
	addr   string        // its peer address
	exited chan struct{} // closed when it has exited; err is then set
	err    error         // what Wait returned
}

// stop sends sig and waits for the daemon to exit; it returns what Wait returned.
func (d *daemonProcess) stop(sig os.Signal) error {
	d.cmd.Process.Signal(sig)
	<-d.exited
	return d.err
}

// startDaemonProcess starts a daemon for home and waits until it answers. At the end of
// the test a daemon still running is stopped with SIGTERM and must exit 0.
func startDaemonProcess(t *testing.T, home string) *daemonProcess {
	t.Helper()
	d := &daemonProcess{cmd: exec.Command(bin, "--home", home, "daemon", "--listen", "127.0.0.1:0"), exited: make(chan struct{})}
	logf, _ := os.OpenFile(home+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	d.cmd.Stderr = logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			if err := d.stop(syscall.SIGTERM); err != nil {
				t.Errorf("daemon for %s did not exit cleanly on SIGTERM: %v", home, err)
			}
		}
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, code := peerfs(t, home, "status", "--json")
		if code == 0 {
			var st struct{ Listen string }
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("status --json is not one JSON document: %v\n%s", err, out)
			}
			d.addr = st.Listen
			return d
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(home + ".log")
			t.Fatalf("daemon did not come up:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCLIEndToEnd(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "alpha"), filepath.Join(dir, "beta")

	// Not initialised, no daemon: the documented codes.
	if _, errs, code := peerfs(t, a, "id"); code != 11 || !strings.Contains(errs, "peerfs init") {
		t.Fatalf("id before init: exit %d, %q", code, errs)
	}
	must(t, a, "init", "--name", "alpha")
	must(t, b, "init", "--name", "beta")
	if _, _, code := peerfs(t, a, "init"); code == 0 {
		t.Fatal("second init succeeded")
	}
	if _, errs, code := peerfs(t, b, "ls", "alpha:"); code != 3 || !strings.Contains(errs, "peerfs daemon") {
		t.Fatalf("ls without a daemon: exit %d, %q", code, errs)
	}
	idA := strings.TrimSpace(must(t, a, "id"))
	var idJSON struct {
		DeviceID string `json:"device_id"`
	}
	if err := json.Unmarshal([]byte(must(t, b, "id", "--json")), &idJSON); err != nil || len(idJSON.DeviceID) != 63 {
		t.Fatalf("id --json: %+v %v", idJSON, err)
	}
	idB := idJSON.DeviceID
	// A mistyped ID is rejected, not silently different.
	typo := []byte(idA)
	typo[3] ^= 1
	if _, _, code := peerfs(t, b, "peer", "add", string(typo), "--name", "alpha"); code != 2 {
		t.Fatalf("peer add with a typo: exit %d, want 2", code)
	}

	addrA := startDaemon(t, a)
	startDaemon(t, b)
	must(t, a, "peer", "add", idB, "--name", "beta")
	must(t, b, "peer", "add", idA, "--name", "alpha", "--addr", addrA)

	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "data.bin"), bytes.Repeat([]byte{7}, 3<<20), 0o600)
	inbox := filepath.Join(dir, "inbox")
	os.Mkdir(inbox, 0o755)
	must(t, a, "share", "add", "docs", src, "--read-only", "--peer", "beta")
	must(t, a, "share", "add", "inbox", inbox, "--peer", "beta")
	if out := must(t, a, "share", "ls"); !strings.Contains(out, "docs") || !strings.Contains(out, "inbox") {
		t.Fatalf("share ls: %s", out)
	}

	if out := must(t, b, "ls", "alpha:"); !strings.Contains(out, "docs") || !strings.Contains(out, "inbox") {
		t.Fatalf("ls alpha: %s", out)
	}
	out := must(t, b, "ls", "alpha:docs")
	if !strings.Contains(out, "-rw-r--r--") || !strings.Contains(out, "hello.txt") || !strings.Contains(out, "drwxr-xr-x") {
		t.Fatalf("ls -l style listing: %s", out)
	}

	// status shows the negotiated link.
	var st struct {
		Peers []struct {
			Name      string
			Connected bool
			TLS       string `json:"tls"`
			KeyExch   string `json:"key_exchange"`
		}
	}
	if err := json.Unmarshal([]byte(must(t, b, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 || !st.Peers[0].Connected || st.Peers[0].TLS != "TLS 1.3" || st.Peers[0].KeyExch != "X25519MLKEM768" {
		t.Fatalf("status: %+v", st)
	}

	// Pull a tree (text summary on stdout), then a file with NDJSON events.
	dest := filepath.Join(dir, "dest")
	os.Mkdir(dest, 0o755)
	if out := must(t, b, "pull", "alpha:docs", dest); !strings.Contains(out, "pulled 2 files") {
		t.Fatalf("pull summary: %q", out)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "docs", "sub", "data.bin")); len(got) != 3<<20 {
		t.Fatalf("pulled data.bin has %d bytes", len(got))
	}
	out = must(t, b, "pull", "alpha:docs/hello.txt", filepath.Join(dest, "copy.txt"), "--json")
	var types []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("pull --json line %q: %v", sc.Text(), err)
		}
		types = append(types, ev.Type)
	}
	if len(types) < 2 || types[0] != "start" || types[len(types)-1] != "done" {
		t.Fatalf("pull --json events %v", types)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "copy.txt")); string(got) != "hello\n" {
		t.Fatalf("copy.txt = %q", got)
	}

	// Send into the writable share; a read-only one refuses.
	must(t, b, "send", filepath.Join(dest, "copy.txt"), "alpha:inbox")
	if got, _ := os.ReadFile(filepath.Join(inbox, "copy.txt")); string(got) != "hello\n" {
		t.Fatalf("sent file = %q", got)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"send", filepath.Join(dest, "copy.txt"), "alpha:docs"}, 7},
		{[]string{"pull", "alpha:docs/missing", dest}, 6},
		{[]string{"ls", "alpha:nosuchshare"}, 6},
		{[]string{"ls", "nobody:docs"}, 5},
		{[]string{"pull", "alpha:docs/../../etc/passwd", dest}, 8},
	} {
		_, errs, code := peerfs(t, b, c.args...)
		if code != c.code || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("peerfs %s: exit %d (want %d), stderr %q", strings.Join(c.args, " "), code, c.code, errs)
		}
	}
	_, errs, _ := peerfs(t, b, "--json", "ls", "nobody:docs")
	var je struct {
		Type     string
		ExitCode int `json:"exit_code"`
		Error    struct{ Code string }
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &je); err != nil || je.Type != "error" || je.ExitCode != 5 || je.Error.Code != "unknown_peer" {
		t.Fatalf("--json error object, last line of stderr: %q (%v)", errs, err)
	}

	// Nothing in the homes is readable by others.
	for _, home := range []string{a, b} {
		filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().Perm()&0o077 != 0 && fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s has mode %v", p, fi.Mode())
			}
			return nil
		})
	}
}

// needFUSE skips a test on machines without FUSE.
func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: mount tests need FUSE (load the fuse module)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found: install fuse3")
	}
}

// isMounted reports whether dir is a mount point, from /proc/self/mountinfo.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// sharedPair makes two homes: alpha, whose daemon runs and exports a folder holding
// hello.txt as "docs" to beta, and beta, which knows alpha's address.
func sharedPair(t *testing.T) (a, b, src string) {
	t.Helper()
	dir := t.TempDir()
	a, b = filepath.Join(dir, "alpha"), filepath.Join(dir, "beta")
	must(t, a, "init", "--name", "alpha")
	must(t, b, "init", "--name", "beta")
	addrA := startDaemon(t, a)
	must(t, a, "peer", "add", strings.TrimSpace(must(t, b, "id")), "--name", "beta")
	must(t, b, "peer", "add", strings.TrimSpace(must(t, a, "id")), "--name", "alpha", "--addr", addrA)
	src = filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644)
	must(t, a, "share", "add", "docs", src, "--peer", "beta")
	return a, b, src
}

// foreground is a "peerfs mount --foreground" process.
type foreground struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{} // closed when it has exited; err is then set
	err    error
}

// startForeground runs "peerfs mount --foreground" for home and waits for its "mounted"
// line on stdout.
func startForeground(t *testing.T, home string, args ...string) *foreground {
	t.Helper()
	f := &foreground{stderr: new(bytes.Buffer), exited: make(chan struct{})}
	f.cmd = exec.Command(bin, append([]string{"--home", home, "mount", "--foreground"}, args...)...)
	f.cmd.Stderr = f.stderr
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		f.err = f.cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-f.exited:
		default:
			f.cmd.Process.Kill()
			<-f.exited
		}
		exec.Command("fusermount3", "-u", "-z", args[len(args)-1]).Run() // only after a failure
	})
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "mounted ") {
			t.Fatalf("foreground mount printed %q", line)
		}
	case <-f.exited:
		t.Fatalf("foreground mount exited: %v\n%s", f.err, f.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("foreground mount not up after 20 s:\n%s", f.stderr)
	}
	return f
}

// wait waits up to 20 s for the process to exit and returns its exit code.
func (f *foreground) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-f.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("foreground mount still running 20 s later:\n%s", f.stderr)
	}
	if ee, ok := f.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	return 0
}

// TestForegroundMount: "peerfs mount --foreground" serves a mount from its own process, with
// no daemon for its home: the mount is used, listed and counted, and SIGINT, fusermount3 -u
// or "peerfs unmount" each unmount it and end the process with status 0.
func TestForegroundMount(t *testing.T) {
	needFUSE(t)
	_, b, src := sharedPair(t)
	mnt := t.TempDir()

	fg := startForeground(t, b, "alpha:docs", mnt)
	if got, err := os.ReadFile(filepath.Join(mnt, "hello.txt")); err != nil || string(got) != "hello\n" {
		t.Fatalf("hello.txt through the mount: %q %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new.txt"), []byte("written through the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "new.txt")); string(got) != "written through the mount\n" {
		t.Fatalf("the owner has %q", got)
	}
	if out, err := exec.Command("ls", mnt).Output(); err != nil || string(out) != "hello.txt\nnew.txt\n" {
		t.Fatalf("ls: %q %v", out, err)
	}
	if out := must(t, b, "mounts"); !strings.Contains(out, mnt) || !strings.Contains(out, "foreground") {
		t.Fatalf("mounts: %q", out)
	}
	if out := must(t, b, "stats", mnt); !strings.Contains(out, "write") {
		t.Fatalf("stats: %q", out)
	}
	fg.cmd.Process.Signal(syscall.SIGINT)
	if code := fg.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGINT:\n%s", code, fg.stderr)
	}
	if isMounted(t, mnt) {
		t.Fatal("still mounted after SIGINT")
	}

	fg = startForeground(t, b, "alpha:docs", mnt)
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	if code := fg.wait(t); code != 0 {
		t.Fatalf("exit %d after fusermount3 -u:\n%s", code, fg.stderr)
	}

	fg = startForeground(t, b, "alpha:docs", mnt)
	must(t, b, "unmount", mnt)
	if code := fg.wait(t); code != 0 || isMounted(t, mnt) {
		t.Fatalf("exit %d after peerfs unmount (mounted: %v):\n%s", code, isMounted(t, mnt), fg.stderr)
	}

	// Refusals: one line saying what to do, the documented status.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "f"), nil, 0o644)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"alpha:docs", full}, 2, "not empty"},
		{[]string{"alpha:nosuch", mnt}, 6, "nosuch"},
		{[]string{"nobody:docs", mnt}, 5, "peerfs peer add"},
		{[]string{"alpha:docs", filepath.Join(full, "missing")}, 6, "create it first"},
	} {
		_, errs, code := peerfs(t, b, append([]string{"mount", "--foreground", "--quiet"}, c.args...)...)
		if code != c.code || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.says) {
			t.Errorf("mount --foreground %s: exit %d (want %d), stderr %q", strings.Join(c.args, " "), code, c.code, errs)
		}
	}
}

// TestDaemonRestartRestoresMount: the daemon mounts again, after a restart, what it had
// mounted; after a crash too, detaching the dead mount first; "peerfs unmount" forgets.
func TestDaemonRestartRestoresMount(t *testing.T) {
	needFUSE(t)
	_, b, _ := sharedPair(t)
	mnt := t.TempDir()
	t.Cleanup(func() { exec.Command("fusermount3", "-u", "-z", mnt).Run() }) // only after a failure
	d := startDaemonProcess(t, b)
	must(t, b, "mount", "alpha:docs", mnt)

	back := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := os.ReadFile(filepath.Join(mnt, "hello.txt"))
			if err == nil && string(got) == "hello\n" && strings.Contains(must(t, b, "mounts"), mnt) {
				return
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(b + ".log")
				t.Fatalf("mount not back 10 s after %s: %q %v\n%s", what, got, err, log)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	back("mounting")

	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v", err)
	}
	if isMounted(t, mnt) {
		t.Fatal("still mounted after the daemon stopped")
	}
	d = startDaemonProcess(t, b)
	back("a restart")

	d.stop(syscall.SIGKILL)
	if _, err := os.ReadDir(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL the mount point reads: %v, want ENOTCONN", err)
	}
	d = startDaemonProcess(t, b)
	back("a crash")

	must(t, b, "unmount", mnt)
	d.stop(syscall.SIGTERM)
	startDaemonProcess(t, b)
	if out := must(t, b, "mounts"); strings.Contains(out, mnt) {
		t.Fatalf("mounts after unmount and restart: %q", out)
	}
	if rec, _ := os.ReadFile(filepath.Join(b, "config", "mounts.json")); strings.Contains(string(rec), mnt) {
		t.Fatalf("mounts.json still names %s:\n%s", mnt, rec)
	}
}
