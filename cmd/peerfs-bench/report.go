package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The report verb: every Section a suite wrote with --out becomes part of BENCHMARKS.md, and
// every Plot a PNG file beside it. Only the text between the two markers is rewritten; the
// rest of the file (introduction, how to reproduce, which defaults came from which figure)
// is the authors' and stays as it is.

const (
	resultsBegin = "<!-- results:begin -->"
	resultsEnd   = "<!-- results:end -->"
)

// reportOrder is the order of the sections in BENCHMARKS.md, from the link up to the
// workloads; suites not listed here follow, by name.
var reportOrder = []string{"link", "mount", "blocksize", "patterns", "meta", "tree", "tune", "wan", "reach"}

// plotRef is how a section's Markdown places a plot: "{{plot wan-find-grep.png}}".
var plotRef = regexp.MustCompile(`\{\{plot ([^{}]+)\}\}`)

const reportUsage = "peerfs-bench report [--results bench-results] [--markdown BENCHMARKS.md] [--plots docs/bench]"

// reportMain runs "peerfs-bench report ARGS" and returns the exit code.
func reportMain(args []string) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(os.Stderr, "usage: "+reportUsage); fs.PrintDefaults() }
	results := fs.String("results", "bench-results", "directory of the suites' JSON sections (--out)")
	markdown := fs.String("markdown", "BENCHMARKS.md", "file whose results part is regenerated, between "+resultsBegin+" and "+resultsEnd)
	plots := fs.String("plots", "docs/bench", "directory the PNG plots are written to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	n, np, err := runReport(*results, *markdown, *plots)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerfs-bench report:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s: %d sections; %d plots in %s\n", *markdown, n, np, *plots)
	return 0
}

// runReport reads the sections in resultsDir, draws their plots into plotsDir and rewrites
// the results part of markdown. It returns how many sections and plots it wrote.
func runReport(resultsDir, markdown, plotsDir string) (sections, plots int, err error) {
	secs, err := readSections(resultsDir)
	if err != nil {
		return 0, 0, err
	}
	doc, err := os.ReadFile(markdown)
	if err != nil {
		return 0, 0, err
	}
	// Images are linked relative to the Markdown file, as a renderer resolves them.
	absMD, err := filepath.Abs(markdown)
	if err != nil {
		return 0, 0, err
	}
	absPlots, err := filepath.Abs(plotsDir)
	if err != nil {
		return 0, 0, err
	}
	rel, err := filepath.Rel(filepath.Dir(absMD), absPlots)
	if err != nil {
		return 0, 0, err
	}
	body, err := renderSections(secs, filepath.ToSlash(rel))
	if err != nil {
		return 0, 0, err
	}
	out, err := replaceResults(string(doc), body)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", markdown, err)
	}
	if err := os.MkdirAll(plotsDir, 0o755); err != nil {
		return 0, 0, err
	}
	for _, s := range secs {
		for _, p := range s.Plots {
			if err := drawPlot(p, filepath.Join(plotsDir, p.File)); err != nil {
				return 0, 0, fmt.Errorf("%s: %w", s.Suite, err)
			}
			plots++
		}
	}
	return len(secs), plots, writeFileAtomic(markdown, []byte(out))
}

// readSections reads every *.json file of dir as a Section, in the report's order.
func readSections(dir string) ([]*Section, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.json results in %s (the suites write them with --out)", dir)
	}
	var secs []*Section
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s Section
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if s.Suite == "" || s.Title == "" {
			return nil, fmt.Errorf("%s is not a peerfs-bench section (no suite or title)", f)
		}
		for _, p := range s.Plots {
			if p.File == "" || filepath.Base(p.File) != p.File || filepath.Ext(p.File) != ".png" {
				return nil, fmt.Errorf("%s: plot file %q: want a plain file name ending in .png", f, p.File)
			}
		}
		secs = append(secs, &s)
	}
	rank := func(suite string) int {
		if i := slices.Index(reportOrder, suite); i >= 0 {
			return i
		}
		return len(reportOrder)
	}
	slices.SortStableFunc(secs, func(a, b *Section) int {
		return cmp.Or(cmp.Compare(rank(a.Suite), rank(b.Suite)), strings.Compare(a.Suite, b.Suite))
	})
	return secs, nil
}

// renderSections writes the sections as Markdown: a heading, a line with the command, the
// machine and the date, then the section's own text with its plots in place (those it does
// not place follow it), then its notes. imgDir is the plots' directory relative to the
// Markdown file.
func renderSections(secs []*Section, imgDir string) (string, error) {
	var b strings.Builder
	for _, s := range secs {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		fmt.Fprintf(&b, "Command: `%s`; run on %s, %s.\n\n", s.Command, s.Date, s.Machine)
		placed := map[string]bool{}
		var missing []string
		md := plotRef.ReplaceAllStringFunc(s.Markdown, func(ref string) string {
			name := strings.TrimSpace(plotRef.FindStringSubmatch(ref)[1])
			i := slices.IndexFunc(s.Plots, func(p Plot) bool { return p.File == name })
			if i < 0 {
				missing = append(missing, name)
				return ref
			}
			placed[name] = true
			return plotImage(s.Plots[i], imgDir)
		})
		if len(missing) > 0 {
			return "", fmt.Errorf("section %q places plots it does not carry: %s", s.Suite, strings.Join(missing, ", "))
		}
		b.WriteString(strings.TrimSpace(md) + "\n")
		for _, p := range s.Plots {
			if !placed[p.File] {
				b.WriteString("\n" + plotImage(p, imgDir) + "\n")
			}
		}
		if len(s.Notes) > 0 {
			b.WriteString("\nNotes:\n\n")
			for _, n := range s.Notes {
				b.WriteString("- " + n + "\n")
			}
		}
	}
	return b.String(), nil
}

func plotImage(p Plot, imgDir string) string {
	title := strings.NewReplacer("[", "(", "]", ")").Replace(p.Title)
	return fmt.Sprintf("![%s](%s)", title, slashJoin(imgDir, p.File))
}

// slashJoin joins with a slash, as Markdown links want on every system.
func slashJoin(dir, file string) string {
	if dir == "" || dir == "." {
		return file
	}
	return strings.TrimSuffix(dir, "/") + "/" + file
}

// replaceResults replaces what lies between the markers with body and keeps the rest.
func replaceResults(doc, body string) (string, error) {
	begin := strings.Index(doc, resultsBegin)
	end := strings.Index(doc, resultsEnd)
	if begin < 0 || end < 0 {
		return "", fmt.Errorf("no results part: add a line %s and a line %s where the results go", resultsBegin, resultsEnd)
	}
	if end < begin || strings.Count(doc, resultsBegin) > 1 || strings.Count(doc, resultsEnd) > 1 {
		return "", fmt.Errorf("want one %s followed by one %s", resultsBegin, resultsEnd)
	}
	head := doc[:begin+len(resultsBegin)]
	return head + "\n\n" + strings.Trim(body, "\n") + "\n\n" + doc[end:], nil
}

// writeFileAtomic replaces path with data through a temporary file in the same directory,
// keeping path's mode, so an interrupted report leaves the old file whole.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
