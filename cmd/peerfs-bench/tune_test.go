package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTune keeps the tune suite from rotting, as TestWorkloads does for the others: it builds
// both binaries, runs "tune --quick" as a user would, and wants one positive sample for every
// flag value on every workload it is swept on, and for every native reference. A workload
// that failed through the mount (the suite records it and goes on) fails the test with the
// suite's reason. It asserts no figures: those belong in BENCHMARKS.md.
func TestTune(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts two daemons")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("skipping the tune benchmark: /dev/fuse is missing (modprobe fuse)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("skipping the tune benchmark: fusermount3 is missing (apt-get install fuse3)")
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

	out := filepath.Join(t.TempDir(), "tune.json")
	cmd := exec.Command(filepath.Join(bin, "peerfs-bench"), "tune", "--quick", "--peerfs", filepath.Join(bin, "peerfs"), "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err = cmd.Run()
	t.Logf("peerfs-bench tune --quick (%.1f s):\n%s", time.Since(t0).Seconds(), stdout.String())
	if err != nil {
		t.Fatalf("peerfs-bench tune --quick: %v\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var sec struct {
		workloadSection
		Raw struct {
			figures
			Params struct {
				Failures []tuneFailure `json:"failures"`
			} `json:"params"`
		} `json:"raw"`
	}
	if err := json.Unmarshal(data, &sec); err != nil {
		t.Fatal(err)
	}
	if sec.Suite != "tune" || !strings.Contains(sec.Markdown, "Defaults, from these figures") {
		t.Errorf("section: suite %q, markdown without the defaults:\n%s", sec.Suite, sec.Markdown)
	}
	for _, f := range sec.Raw.Params.Failures {
		t.Errorf("--%s: failed in run %d: %s (beta's log: %s)", strings.Replace(f.Row, ":", " "+f.Target+":", 1), f.Run, f.Error, f.Log)
	}

	natives := map[string]bool{}
	knobs := tuneKnobs()
	if len(sec.Plots) != len(knobs) {
		t.Errorf("%d plots, want one per flag (%d)", len(sec.Plots), len(knobs))
	}
	for _, k := range knobs {
		quick := []string{k.name(k.values[0]), k.name(k.def)}
		for _, w := range k.work {
			natives[w] = true
			for _, v := range quick {
				checkSample(t, &sec.Raw.figures, tuneRow(k.flag, w), v)
			}
		}
		if !strings.Contains(sec.Markdown, "{{plot tune-"+k.flag+".png}}") {
			t.Errorf("the plot of --%s is not placed in the markdown", k.flag)
		}
	}
	for w := range natives {
		checkSample(t, &sec.Raw.figures, tuneRow(tNative, w), tNative)
	}
	for _, p := range sec.Plots {
		for _, s := range p.Series {
			if len(s.X) != len(s.Y) || len(s.Y) != len(s.YMin) || len(s.Y) != len(s.YMax) {
				t.Errorf("plot %s, series %q: %d x, %d y, %d min, %d max", p.File, s.Name, len(s.X), len(s.Y), len(s.YMin), len(s.YMax))
			}
		}
	}
}

// checkSample wants one positive sample for a row and target.
func checkSample(t *testing.T, fs *figures, row, target string) {
	t.Helper()
	switch f := fs.get(row, target); {
	case f == nil:
		t.Errorf("%s, %s: no figure", row, target)
	case len(f.Values) != 1 || !(f.Values[0] > 0):
		t.Errorf("%s, %s: samples %v, want one positive", row, target, f.Values)
	}
}
