package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestQuick keeps the benchmark harness from rotting: it builds peerfs and peerfs-bench and
// runs "link --quick" and "mount --quick" as a user would, then checks that every path and
// workload produced a sample. It asserts no figures: those belong in BENCHMARKS.md.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts two daemons")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := t.TempDir()
	for _, pkg := range []string{"peerfs", "peerfs-bench"} {
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(bin, pkg), "./cmd/"+pkg)
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", pkg, err, out)
		}
	}
	run := func(t *testing.T, verb string, extra ...string) []byte {
		out := filepath.Join(t.TempDir(), verb+".json")
		args := append([]string{verb, "--quick", "--peerfs", filepath.Join(bin, "peerfs"), "--out", out}, extra...)
		cmd := exec.Command(filepath.Join(bin, "peerfs-bench"), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		err := cmd.Run()
		t.Logf("peerfs-bench %s --quick (%.1f s):\n%s", verb, time.Since(t0).Seconds(), stdout.String())
		if err != nil {
			t.Fatalf("peerfs-bench %s --quick: %v\n%s", verb, err, stderr.String())
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	t.Run("link", func(t *testing.T) {
		var rep report
		if err := json.Unmarshal(run(t, "link"), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Paths) != 5 {
			t.Fatalf("%d paths in the report, want 5", len(rep.Paths))
		}
		for _, p := range rep.Paths {
			if len(p.Samples) != 1 || p.Samples[0].Seconds <= 0 {
				t.Errorf("path %q: samples %+v, want one timed run", p.Name, p.Samples)
			}
		}
	})

	t.Run("mount", func(t *testing.T) {
		if _, err := os.Stat("/dev/fuse"); err != nil {
			t.Skip("skipping the mount benchmark: /dev/fuse is missing (modprobe fuse)")
		}
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("skipping the mount benchmark: fusermount3 is missing (apt-get install fuse3)")
		}
		var rep mountReport
		if err := json.Unmarshal(run(t, "mount"), &rep); err != nil {
			t.Fatal(err)
		}
		for _, n := range rep.Notes {
			t.Logf("note: %s", n)
		}
		want := []string{tPeerfs, tNative}
		if _, _, _, missing := sshfsTools(); missing == nil {
			want = append(want, tSSHFS)
		} else {
			t.Logf("sshfs column not checked: %v", missing)
		}
		if len(rep.Workloads) != 5 {
			t.Fatalf("%d workloads in the report, want 5", len(rep.Workloads))
		}
		for _, w := range rep.Workloads {
			for _, target := range want {
				if s := w.samples(target); len(s) != 1 || s[0].Seconds <= 0 {
					t.Errorf("%s on %s: samples %+v, want one timed run", w.Key, target, s)
				}
			}
		}
	})
}
