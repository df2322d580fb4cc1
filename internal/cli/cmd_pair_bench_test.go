package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/netlab"
)

// cliRun runs a command line against home without a *testing.T.
func cliRun(home string, args ...string) (exit int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	exit = execute(context.Background(), append([]string{"--home", home}, args...), &out, &errOut, false)
	return exit, out.String(), errOut.String()
}

// BenchmarkPairLab times pairing between two hosts on a bridge (internal/netlab), each with
// a daemon in its own namespace: from the start of "peerfs pair CODE" (the joiner finds the
// other by LAN discovery) to its return, trusted, and to the joiner's daemon reporting the
// link up. Each iteration pairs fresh homes and daemons; setup is not timed (ns/op counts
// only what lies outside it, and means nothing here). It reports the medians as ms-trusted
// and ms-connected (BENCHMARKS.md, "Pairing on a bridge").
//
//	flock /work/wt/.bench.lock go test -run '^$' -bench PairLab -benchtime 10x ./internal/cli/
func BenchmarkPairLab(b *testing.B) {
	lab := netlab.New(b)
	r := lab.Router("r", netlab.RouterOptions{NAT: netlab.HomeNAT})
	hosts := []*netlab.Host{r.AddHost("a"), r.AddHost("b")}
	var trusted, connected []float64
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		homes := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
		var procs []*netlab.Proc
		for j, home := range homes {
			if exit, _, errOut := cliRun(home, "init", "--name", []string{"alpha", "beta"}[j]); exit != 0 {
				b.Fatalf("init: %s", errOut)
			}
			procs = append(procs, hosts[j].Start("peerfs", "--home", home, "daemon", "--listen", ":7462"))
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if exit, _, _ := cliRun(home, "status"); exit == 0 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("daemon of %s did not start: %s", home, procs[j].Stderr())
				}
			}
		}

		pr, pw := io.Pipe()
		showDone := make(chan int, 1)
		go func() {
			showDone <- execute(context.Background(), []string{"--home", homes[0], "--json", "pair"}, pw, io.Discard, false)
			pw.Close()
		}()
		lines := bufio.NewScanner(pr)
		var first struct{ Code string }
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &first) != nil || first.Code == "" {
			b.Fatalf("no code shown: %q", lines.Text())
		}
		go func() {
			for lines.Scan() {
			}
		}()

		start := time.Now()
		if exit, _, errOut := cliRun(homes[1], "pair", first.Code); exit != 0 {
			b.Fatalf("pair: exit %d: %s", exit, errOut)
		}
		trusted = append(trusted, ms(time.Since(start)))
		for {
			if _, out, _ := cliRun(homes[1], "status", "--json"); strings.Contains(out, `"connected": true`) {
				connected = append(connected, ms(time.Since(start)))
				break
			}
			if time.Since(start) > 30*time.Second {
				b.Fatal("no link within 30 s of pairing")
			}
			time.Sleep(time.Millisecond)
		}
		if exit := <-showDone; exit != 0 {
			b.Fatalf("shower: exit %d", exit)
		}
		for _, p := range procs {
			p.Stop()
		}
	}
	b.ReportMetric(medianOf(trusted), "ms-trusted")
	b.ReportMetric(medianOf(connected), "ms-connected")
	b.Logf("ms to trusted %v; to connected %v", trusted, connected)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	switch n := len(s); {
	case n == 0:
		return 0
	case n%2 == 1:
		return s[n/2]
	default:
		return (s[n/2-1] + s[n/2]) / 2
	}
}
