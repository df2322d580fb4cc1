package main

import (
	"strings"
	"testing"
)

// runLab behaves as package testing does for netlab: Fatal and Skip end the lab's goroutine,
// and the cleanups run last first, even after a Fatal.
func TestRunLab(t *testing.T) {
	var order []string
	reached := false
	_, err := runLab(func(lt *labTB) {
		lt.Cleanup(func() { order = append(order, "first") })
		lt.Cleanup(func() { order = append(order, "second"); lt.Fatal("in a cleanup") })
		lt.Fatalf("stop %d", 1)
		reached = true
	})
	if err == nil || err.Error() != "stop 1" || reached {
		t.Fatalf("Fatalf: err %v, code after it ran: %v", err, reached)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Fatalf("cleanups ran %v, want second,first", order)
	}
	skip, err := runLab(func(lt *labTB) { lt.Skip("no netns"); reached = true })
	if skip != "no netns" || err != nil || reached {
		t.Fatalf("Skip: %q, %v, code after it ran: %v", skip, err, reached)
	}
}

// A reach run without the loopback part, or with the lab skipped, still renders.
func TestReachSectionParts(t *testing.T) {
	sec := reachSection(reachReport{Lab: &labReport{Skipped: "netlab: needs CAP_NET_ADMIN"}})
	if !strings.Contains(sec.Markdown, "Not measured on this machine: netlab: needs CAP_NET_ADMIN") {
		t.Fatalf("a skipped lab: %s", sec.Markdown)
	}
	lab := labReport{Runs: 2, CutRuns: 1, Size: 256 << 20, Link: map[string][]labLinkSample{}, Pull: map[string][]labPullSample{}}
	for _, p := range labPaths {
		lab.Link[p] = []labLinkSample{{UsableMs: 30, PathMs: 40, FirstOn: labRelayed}, {UsableMs: 50, PathMs: 60, FirstOn: p}}
	}
	lab.Pull[labDirect] = []labPullSample{{MiBs: 500}, {MiBs: 400}}
	lab.Pull[labPunched] = []labPullSample{{MiBs: 450}, {MiBs: 400}}
	lab.Pull[labRelayed] = []labPullSample{{MiBs: 400, RelayCPUPerGiB: 0.2}, {MiBs: 300, RelayCPUPerGiB: 0.3}}
	lab.Cut = []labCutSample{{ServingMs: 10500, PathAfter: labRelayed}}
	md := reachSection(reachReport{Lab: &lab}).Markdown
	for _, want := range []string{
		"| punched | desktop and laptop, two home NATs, meet at the relay | 40 (30-50) | 50 (40-60) | punched 1 of 2, relayed 1 of 2 |",
		"| relayed | 350 (300-400) | 78% (75-80) | 0.00 (0.00-0.00) | 0.00 (0.00-0.00) | 0.25 (0.20-0.30) |",
		"misses the goal of 80%",
		"1 runs: the mount served again 10.5 s (10.5-10.5)",
		"10 s timeout plus 0.5 s of fallback",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the lab's markdown lacks %q:\n%s", want, md)
		}
	}
}
