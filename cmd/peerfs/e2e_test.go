package main_test

// End-to-end test of the built binary as a user drives it: two daemons on loopback, the CLI
// for everything, text and JSON output, and the documented exit codes.

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	cmd := exec.Command(bin, "--home", home, "daemon", "--listen", "127.0.0.1:0")
	logf, _ := os.Create(home + ".log")
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("daemon for %s did not exit cleanly on SIGTERM: %v", home, err)
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
			return st.Listen
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
