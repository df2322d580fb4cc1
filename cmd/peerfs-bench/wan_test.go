package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseRTTs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0,10,50", []int{0, 10, 50}, true},
		{" 10 , 50ms ", []int{10, 50}, true},
		{"10,10", nil, false},
		{"-5", nil, false},
		{"ten", nil, false},
	} {
		got, err := parseRTTs(c.in)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("parseRTTs(%q) = %v, %v", c.in, got, err)
		}
	}
}

// TestWANSlope checks the round-trip arithmetic on made-up figures: a workload that waits
// for 300 round trips one after the other takes 0.3 s more per ms of round trip.
func TestWANSlope(t *testing.T) {
	r := &wanReport{TreeFiles: 1000, TreeDirs: 11, Runs: 1, Size: 16 << 20, RateMbit: 1000}
	r.Conditions = []*wanCondition{{Name: wanLoopback}}
	for _, ms := range []int{0, 10, 50} {
		r.Conditions = append(r.Conditions, &wanCondition{Name: strings.Repeat("x", ms+1), Proxied: true, RTTms: ms, RateMbit: 1000})
	}
	for _, c := range r.Conditions {
		r.result(wFindGrep, tPeerfs, c.Name).Samples = []wanSample{{Seconds: 2 + 0.3*float64(c.RTTms), RoundTrips: 290}}
		r.result(wFindGrep, tSSHFS, c.Name).Samples = []wanSample{{Seconds: 3 + 2.5*float64(c.RTTms)}}
	}
	// Loopback would fit too (its 2 s lie on the line), but only the proxied ones are used.
	r.result(wFindGrep, tSSHFS, wanLoopback).Samples[0].Seconds = 100
	if k, ok := r.slope(wFindGrep, tPeerfs); !ok || math.Abs(k-0.3) > 1e-9 {
		t.Errorf("peerfs slope %v, %v; want 0.3", k, ok)
	}
	if k, ok := r.slope(wFindGrep, tSSHFS); !ok || math.Abs(k-2.5) > 1e-9 {
		t.Errorf("sshfs slope %v, %v; want 2.5", k, ok)
	}
	sec := wanSection(r)
	for _, want := range []string{"| find + grep -r, 1000 files | peerfs | 0.300 | 300 | 290 |", "about 2500 on sshfs (2.50 per file)", "{{plot wan-find-grep.png}}"} {
		if !strings.Contains(sec.Markdown, want) {
			t.Errorf("section lacks %q:\n%s", want, sec.Markdown)
		}
	}
	if len(sec.Plots) != 1 || len(sec.Plots[0].Series) != 2 || len(sec.Plots[0].Series[0].X) != 3 {
		t.Errorf("plots %+v, want one with two series of the three proxied conditions", sec.Plots)
	}
}

func TestMakeWANTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	dirs, inline, needles, err := makeWANTree(dir, 250)
	if err != nil {
		t.Fatal(err)
	}
	files, withNeedle := 0, 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
			if b, _ := os.ReadFile(p); strings.Contains(string(b), wanTreeNeedle) {
				withNeedle++
			}
		}
		return err
	})
	if files != 250 || withNeedle != needles || needles != 3 || dirs != 4 || inline <= 0 || inline > 250 {
		t.Errorf("%d files, %d with the needle (said %d), %d dirs, %d inline", files, withNeedle, needles, dirs, inline)
	}
}
