package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestWorkloads keeps the workload suites from rotting: it builds peerfs and peerfs-bench once
// and runs blocksize, patterns, meta and tree (with --large) with --quick as a user would,
// then checks that every row of every section has one positive sample on every target. It
// asserts no figures: those belong in BENCHMARKS.md.
func TestWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts two daemons")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("skipping the workload benchmarks: /dev/fuse is missing (modprobe fuse)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("skipping the workload benchmarks: fusermount3 is missing (apt-get install fuse3)")
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
	withSSHFS := []string{tPeerfs, tNative}
	if _, _, _, missing := sshfsTools(); missing == nil {
		withSSHFS = append(withSSHFS, tSSHFS)
	} else {
		t.Logf("sshfs column not checked: %v", missing)
	}

	// run runs one suite with --quick and returns its section.
	run := func(t *testing.T, verb string, extra ...string) workloadSection {
		out := filepath.Join(t.TempDir(), verb+".json")
		args := append([]string{verb, "--quick", "--peerfs", filepath.Join(bin, "peerfs"), "--out", out}, extra...)
		cmd := exec.Command(filepath.Join(bin, "peerfs-bench"), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		err := cmd.Run()
		t.Logf("peerfs-bench %s --quick (%.1f s):\n%s", strings.Join(args[:1], " "), time.Since(t0).Seconds(), stdout.String())
		if err != nil {
			t.Fatalf("peerfs-bench %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var sec workloadSection
		if err := json.Unmarshal(data, &sec); err != nil {
			t.Fatal(err)
		}
		if sec.Suite != verb || !strings.Contains(sec.Markdown, "Reading it:") {
			t.Errorf("section of %q: suite %q, markdown without a reading:\n%s", verb, sec.Suite, sec.Markdown)
		}
		for _, p := range sec.Plots {
			if !strings.Contains(sec.Markdown, "{{plot "+p.File+"}}") {
				t.Errorf("plot %s is not placed in the markdown", p.File)
			}
			for _, s := range p.Series {
				if len(s.X) == 0 || len(s.X) != len(s.Y) || len(s.Y) != len(s.YMin) || len(s.Y) != len(s.YMax) {
					t.Errorf("plot %s, series %q: %d x, %d y, %d min, %d max", p.File, s.Name, len(s.X), len(s.Y), len(s.YMin), len(s.YMax))
				}
			}
		}
		return sec
	}

	t.Run("blocksize", func(t *testing.T) {
		sec := run(t, "blocksize")
		targets := append([]string{tNative}, strings.Split(defaultBlocksizes, ",")...)
		checkFigures(t, sec.Raw, []string{dirInto, dirOut}, targets)
		if len(sec.Plots) != 1 || len(sec.Plots[0].Series) != 2 {
			t.Errorf("plots %+v, want one with two series", sec.Plots)
		}
		if !strings.Contains(sec.Markdown, "Best block size into the mount") {
			t.Errorf("the markdown does not name the best block size:\n%s", sec.Markdown)
		}
	})

	t.Run("patterns", func(t *testing.T) {
		sec := run(t, "patterns")
		files, _ := parseSizes(quickPatternFiles)
		bufs, _ := parseSizes(defaultPatternBuffers)
		var rows []string
		for _, f := range files {
			for _, random := range modes {
				for _, b := range bufs {
					rows = append(rows, patternRow(f, b, random))
				}
			}
		}
		checkFigures(t, sec.Raw, rows, patternStates)
		// Passthrough is the point of the warm state: no READ may reach the daemon.
		for _, row := range rows {
			if f := sec.Raw.get(row, stWarmPT); f != nil && len(f.Extra["fuse_reads"]) > 0 && f.Extra["fuse_reads"][0] > 0 {
				t.Logf("%s: %v FUSE READs reached the daemon with passthrough", row, f.Extra["fuse_reads"])
			}
		}
	})

	t.Run("meta", func(t *testing.T) {
		sec := run(t, "meta")
		xattrRows := []string{"getxattr security", "getxattr user"}
		checkFigures(t, sec.Raw, metaOps[:len(metaOps)-len(xattrRows)], withSSHFS)
		// sshfs serves no extended attributes: its getxattr cells stay empty, and say why.
		checkFigures(t, sec.Raw, xattrRows, []string{tPeerfs, tNative})
		if len(withSSHFS) == 3 && sec.Raw.get(xattrRows[0], tSSHFS) == nil &&
			!strings.Contains(sec.Markdown, "sshfs serves no extended attributes") {
			t.Errorf("no getxattr figures for sshfs, and the reading does not say why:\n%s", sec.Markdown)
		}
		if !strings.Contains(sec.Markdown, "Floors through peerfs") {
			t.Errorf("the reading does not give the floors of a FUSE request and a round trip:\n%s", sec.Markdown)
		}
	})

	t.Run("tree", func(t *testing.T) {
		sec := run(t, "tree", "--large")
		checkFigures(t, sec.Raw, treePhases, withSSHFS)
		checkFigures(t, sec.Raw, largePhases, []string{tPeerfs, tNative})
	})
}

// workloadSection is a Section whose raw data are figures.
type workloadSection struct {
	Suite    string  `json:"suite"`
	Markdown string  `json:"markdown"`
	Plots    []Plot  `json:"plots"`
	Raw      figures `json:"raw"`
}

// checkFigures wants one positive sample for every row on every target.
func checkFigures(t *testing.T, fs figures, rows, targets []string) {
	t.Helper()
	for _, row := range rows {
		for _, target := range targets {
			f := fs.get(row, target)
			switch {
			case f == nil:
				t.Errorf("%s on %s: no figure", row, target)
			case len(f.Values) != 1 || !(f.Values[0] > 0):
				t.Errorf("%s on %s: samples %v, want one positive", row, target, f.Values)
			}
		}
	}
	if t.Failed() {
		var all []string
		for _, f := range fs.Figures {
			all = append(all, fmt.Sprintf("%s/%s", f.Row, f.Target))
		}
		t.Logf("figures present: %s", strings.Join(all, ", "))
	}
}
