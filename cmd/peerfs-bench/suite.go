package main

import (
	"context"
	"flag"
	"sort"
)

// A suite is one verb of peerfs-bench. Each suite lives in a file of its own and registers
// itself from an init function, so adding one never touches main.go.
type suite struct {
	name  string
	usage string // the flags line shown in the usage text, without the verb
	// flags registers the suite's own flags on fs (the common ones are already there).
	flags func(fs *flag.FlagSet)
	// quick shrinks the suite's own defaults under --quick; set holds the flags given
	// explicitly, which always win.
	quick func(set map[string]bool)
	// run measures and returns the section it contributes to BENCHMARKS.md (nil: none yet).
	// It prints its human-readable report on stdout as it always has.
	run func(ctx context.Context, o commonOptions) (*Section, error)
}

var suites = map[string]*suite{}

func register(s *suite) { suites[s.name] = s }

// suiteNames returns the registered verbs in a stable order.
func suiteNames() []string {
	var names []string
	for n := range suites {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Section is what a suite writes with --out (JSON) and what "report" turns into part of
// BENCHMARKS.md. The suite renders its own Markdown (tables and how to read them); Plots
// carry the curves "report" draws as PNG files; Raw keeps every sample for later analysis.
type Section struct {
	Suite   string `json:"suite"`   // the verb that produced it
	Title   string `json:"title"`   // heading in BENCHMARKS.md
	Command string `json:"command"` // the exact command line that produced it
	Machine string `json:"machine"` // CPU model, cores, kernel, Go version (machine())
	Date    string `json:"date"`    // YYYY-MM-DD
	// Markdown is the section body, without its heading: what was measured, the tables
	// (median with min and max of every figure) and how to read them. A "{{plot NAME}}"
	// line is replaced by the image of the plot whose File is NAME.
	Markdown string   `json:"markdown"`
	Plots    []Plot   `json:"plots,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Raw      any      `json:"raw,omitempty"`
}

// Plot is one chart: a few series over a common X axis.
type Plot struct {
	File   string   `json:"file"` // PNG file name, e.g. "blocksize.png"
	Title  string   `json:"title"`
	XLabel string   `json:"x_label"`
	YLabel string   `json:"y_label"`
	LogX   bool     `json:"log_x,omitempty"`
	LogY   bool     `json:"log_y,omitempty"`
	Series []Series `json:"series"`
}

// Series is one line of a plot: the median at each X, with the min and max as error bars.
type Series struct {
	Name string    `json:"name"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
	YMin []float64 `json:"y_min,omitempty"`
	YMax []float64 `json:"y_max,omitempty"`
}
