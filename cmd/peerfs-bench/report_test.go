package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport runs report over a results directory of two sections, one with a plot, and
// checks that only the text between the markers changes, that the sections come in the
// report's order with their plot in place, and that the plot is a PNG.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "bench-results")
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	sections := map[string]Section{
		"wan.json": {
			Suite: "wan", Title: "WAN title", Command: "peerfs-bench wan", Machine: "test CPU", Date: "2026-01-02",
			Markdown: "| a | b |\n|---|---|\n| 1 | 2 |\n\n{{plot wan-x.png}}\n",
			Plots: []Plot{{
				File: "wan-x.png", Title: "seconds vs RTT", XLabel: "ms", YLabel: "s",
				Series: []Series{
					{Name: "peerfs", X: []float64{0, 10, 50}, Y: []float64{1, 2, 4}, YMin: []float64{0.9, 1.8, 3.5}, YMax: []float64{1.2, 2.5, 4.1}},
					{Name: "sshfs", X: []float64{0, 10, 50}, Y: []float64{2, 9, 40}},
				},
			}},
			Notes: []string{"a note"},
		},
		"link.json": {Suite: "link", Title: "Link title", Command: "peerfs-bench link", Machine: "test CPU", Date: "2026-01-01", Markdown: "link body\n"},
	}
	for name, s := range sections {
		b, _ := json.Marshal(s)
		if err := os.WriteFile(filepath.Join(results, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	intro := "# peerfs benchmarks\n\nHow to reproduce: make bench.\n\n"
	outro := "\n## Defaults\n\nChosen from the figures above.\n"
	md := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(md, []byte(intro+resultsBegin+"\n\n## Old results\n\nstale\n"+resultsEnd+outro), 0o644); err != nil {
		t.Fatal(err)
	}

	n, np, err := runReport(results, md, filepath.Join(dir, "docs", "bench"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || np != 1 {
		t.Errorf("report wrote %d sections and %d plots, want 2 and 1", n, np)
	}
	got, _ := os.ReadFile(md)
	doc := string(got)
	if !strings.HasPrefix(doc, intro+resultsBegin+"\n") || !strings.HasSuffix(doc, resultsEnd+outro) {
		t.Errorf("text outside the markers changed:\n%s", doc)
	}
	if strings.Contains(doc, "stale") {
		t.Errorf("old results kept:\n%s", doc)
	}
	for _, want := range []string{
		"## Link title\n\nCommand: `peerfs-bench link`; run on 2026-01-01, test CPU.\n\nlink body\n",
		"![seconds vs RTT](docs/bench/wan-x.png)",
		"Notes:\n\n- a note\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	if l, w := strings.Index(doc, "## Link title"), strings.Index(doc, "## WAN title"); l < 0 || w < l {
		t.Errorf("sections out of order (link at %d, wan at %d)", l, w)
	}

	f, err := os.Open(filepath.Join(dir, "docs", "bench", "wan-x.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("plot of %v", b)
	}

	// A second report over the same results gives the same file: the markers survive.
	if _, _, err := runReport(results, md, filepath.Join(dir, "docs", "bench")); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(md); string(again) != doc {
		t.Errorf("a second report changed the file:\n%s", again)
	}
}

func TestReplaceResults(t *testing.T) {
	for _, c := range []struct {
		doc, want string
		ok        bool
	}{
		{"a\n" + resultsBegin + "\nold\n" + resultsEnd + "\nb\n", "a\n" + resultsBegin + "\n\nnew\n\n" + resultsEnd + "\nb\n", true},
		{"no markers", "", false},
		{resultsEnd + "\n" + resultsBegin, "", false},
		{resultsBegin + resultsEnd + resultsBegin + resultsEnd, "", false},
	} {
		got, err := replaceResults(c.doc, "\nnew\n")
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("replaceResults(%q) = %q, %v", c.doc, got, err)
		}
	}
}

func TestReportRefusesUnknownPlot(t *testing.T) {
	_, err := renderSections([]*Section{{Suite: "x", Title: "X", Markdown: "{{plot nope.png}}"}}, "docs/bench")
	if err == nil || !strings.Contains(err.Error(), "nope.png") {
		t.Errorf("err = %v, want one naming nope.png", err)
	}
}
