package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildBinaries builds peerfs and peerfs-bench into a temporary directory and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
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
	return bin
}

// runQuick runs "peerfs-bench VERB --quick" as a user would and returns the JSON section it
// wrote with --out.
func runQuick(t *testing.T, bin, verb string, extra ...string) []byte {
	t.Helper()
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

// decodeSection checks the fields every section must fill and decodes its raw report into
// raw.
func decodeSection(t *testing.T, data []byte, suite string, raw any) *Section {
	t.Helper()
	var s struct {
		Section
		Raw json.RawMessage `json:"raw"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Suite != suite || s.Title == "" || s.Command == "" || s.Machine == "" || s.Date == "" {
		t.Errorf("section header: suite %q title %q command %q machine %q date %q", s.Suite, s.Title, s.Command, s.Machine, s.Date)
	}
	if !strings.Contains(s.Markdown, "|---|") {
		t.Errorf("section markdown has no table:\n%s", s.Markdown)
	}
	if err := json.Unmarshal(s.Raw, raw); err != nil {
		t.Fatalf("raw report: %v", err)
	}
	return &s.Section
}

func needFUSE(t *testing.T) {
	t.Helper()
	if missing := fuseMissing(); missing != nil {
		t.Skipf("skipping: the benchmark needs FUSE: %v", missing)
	}
}

// TestQuick keeps the benchmark harness from rotting: it builds peerfs and peerfs-bench and
// runs "link --quick" and "mount --quick" as a user would, then checks that every path and
// workload produced a sample and that the JSON section is complete. It asserts no figures:
// those belong in BENCHMARKS.md.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts two daemons")
	}
	bin := buildBinaries(t)

	t.Run("link", func(t *testing.T) {
		var rep report
		decodeSection(t, runQuick(t, bin, "link"), "link", &rep)
		want := []string{pathTCP, pathTLS, pathTransport, pathCp, pathDiskWrite, pathDiskRead, pathPullFirst, pathPull, pathMountRead}
		if missing := fuseMissing(); missing != nil {
			want = want[:len(want)-1]
			t.Logf("%s not checked: %v", pathMountRead, missing)
		}
		if len(rep.Paths) != len(want) {
			t.Fatalf("%d paths in the report, want %d", len(rep.Paths), len(want))
		}
		for i, p := range rep.Paths {
			if p.Name != want[i] {
				t.Errorf("path %d is %q, want %q", i, p.Name, want[i])
			}
			if len(p.Samples) != 1 || p.Samples[0].Seconds <= 0 || p.Samples[0].CPUSeconds <= 0 {
				t.Errorf("path %q: samples %+v, want one timed run with its CPU time", p.Name, p.Samples)
			}
		}
	})

	t.Run("mount", func(t *testing.T) {
		needFUSE(t)
		var rep mountReport
		decodeSection(t, runQuick(t, bin, "mount"), "mount", &rep)
		for _, n := range rep.Notes {
			t.Logf("note: %s", n)
		}
		want := []string{tPeerfs, tNative}
		if _, _, _, missing := sshfsTools(); missing == nil {
			want = append(want, tSSHFS)
		} else {
			t.Logf("sshfs column not checked: %v", missing)
		}
		if len(rep.Workloads) != 7 {
			t.Fatalf("%d workloads in the report, want 7", len(rep.Workloads))
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

// TestQuickWAN runs "wan --quick" (loopback and 10 ms of added round trip), checks that every
// workload ran on every target under both conditions, that the proxy added at least the round
// trip it claims, and that "report" draws the section's plots.
func TestQuickWAN(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts two daemons")
	}
	needFUSE(t)
	bin := buildBinaries(t)
	data := runQuick(t, bin, "wan")
	var rep wanReport
	sec := decodeSection(t, data, "wan", &rep)
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
	targets := []string{tPeerfs, tPeerfsJournal}
	if _, _, _, missing := sshfsTools(); missing == nil {
		targets = append(targets, tSSHFS)
	} else {
		t.Logf("sshfs not checked: %v", missing)
	}
	if len(rep.Conditions) != 2 || rep.Conditions[0].Name != wanLoopback || rep.Conditions[1].RTTms != 10 {
		t.Fatalf("conditions %+v, want loopback and 10 ms", rep.Conditions)
	}
	// A latency toxic can only delay: the round trip through the proxy is at least the one
	// added (toxiproxy applies latency per direction; half of it goes each way).
	// One keepalive round trip per peerfs target (--writes sync and journal) and run.
	if c := rep.Conditions[1]; c.EchoRTTms < 9.5 || len(c.PeerfsRTTms) != 2 || slices.Min(c.PeerfsRTTms) < 9.5 {
		t.Errorf("10 ms condition measured echo %.2f ms, peerfs %v ms: want at least 10, one per peerfs target", c.EchoRTTms, c.PeerfsRTTms)
	}
	for _, w := range wanWorkloads {
		for _, target := range targets {
			for _, c := range rep.Conditions {
				if m, _, _, ok := rep.seconds(w, target, c.Name); !ok || m <= 0 {
					t.Errorf("%s on %s at %s: no timed run", w, target, c.Name)
				}
			}
		}
		if n, ok := rep.roundTrips(w, tPeerfs, rep.Conditions[1].Name); w == wFindGrep && (!ok || n <= 0) {
			t.Errorf("peerfs counted no round trips for %s", w)
		}
	}
	for _, w := range []string{wClone, wCreate} {
		for _, c := range rep.Conditions {
			if d, _, _, ok := rep.drainSeconds(w, c.Name); !ok || d <= 0 {
				t.Errorf("%s at %s: no drain timed for the journaling mount", w, c.Name)
			}
		}
	}
	if !strings.Contains(sec.Markdown, "| / its loopback |") {
		t.Errorf("the section has no table of the journaling mount against its loopback time")
	}
	if len(sec.Plots) != len(wanWorkloads) {
		t.Errorf("%d plots, want one per workload", len(sec.Plots))
	}
	// The section goes through report as make bench would send it.
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	os.Mkdir(results, 0o755)
	os.WriteFile(filepath.Join(results, "wan.json"), data, 0o644)
	md := filepath.Join(dir, "BENCHMARKS.md")
	os.WriteFile(md, []byte("# b\n"+resultsBegin+"\n"+resultsEnd+"\n"), 0o644)
	if _, np, err := runReport(results, md, filepath.Join(dir, "docs", "bench")); err != nil || np != len(sec.Plots) {
		t.Fatalf("report: %d plots, %v", np, err)
	}
}
