package main

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Size of every plot: fits the width of a rendered BENCHMARKS.md, legible at 100%.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 10 * vg.Centimeter
)

// drawPlot draws one Plot as a PNG at path: a line with markers per series at its medians,
// and error bars from YMin to YMax where the series has them. On a log axis, points at zero
// or below cannot be drawn and are left out.
func drawPlot(p Plot, path string) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if p.LogY {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	pl.X.Tick.Marker = plainTicks{pl.X.Tick.Marker}
	pl.Y.Tick.Marker = plainTicks{pl.Y.Tick.Marker}
	pl.Add(plotter.NewGrid())
	// Top left: the curves here mostly rise to the right.
	pl.Legend.Top, pl.Legend.Left = true, true
	drawn := 0
	for i, s := range p.Series {
		pts := seriesPoints(s, p.LogX, p.LogY)
		if pts.Len() == 0 {
			continue
		}
		line, marks, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("%s, series %q: %w", p.File, s.Name, err)
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		marks.Color = plotutil.Color(i)
		marks.Shape = plotutil.Shape(i)
		pl.Add(line, marks)
		pl.Legend.Add(s.Name, line, marks)
		if pts.bars {
			bars, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return fmt.Errorf("%s, series %q: %w", p.File, s.Name, err)
			}
			bars.Color = plotutil.Color(i)
			pl.Add(bars)
		}
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("%s: no point to draw", p.File)
	}
	fitAxis(&pl.X, p.LogX)
	fitAxis(&pl.Y, p.LogY)
	return pl.Save(plotWidth, plotHeight, path)
}

// fitAxis widens what gonum's automatic range leaves unreadable: a linear axis of values at
// or above zero starts at zero, so that slopes and ratios read true; a log axis spans whole
// decades, so that it gets labelled ticks; a range of one value gets some room.
func fitAxis(a *plot.Axis, log bool) {
	if log {
		a.Min = math.Pow(10, math.Floor(math.Log10(a.Min)))
		a.Max = math.Pow(10, math.Ceil(math.Log10(a.Max)))
		if a.Max <= a.Min {
			a.Max = a.Min * 10
		}
		return
	}
	if a.Min >= 0 {
		a.Min = 0
	}
	if a.Max <= a.Min {
		a.Max = a.Min + 1
	}
}

// plainTicks labels ticks with as few digits as they need ("25", not "25.00"; "0.5").
type plainTicks struct{ plot.Ticker }

func (t plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := t.Ticker.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 6, 64)
		}
	}
	return ticks
}

// plotPoints are one series' drawable points, with their error bars as distances below and
// above the median (what plotter.YErrorer returns).
type plotPoints struct {
	x, y, below, above []float64
	bars               bool
}

func (p *plotPoints) Len() int                        { return len(p.x) }
func (p *plotPoints) XY(i int) (float64, float64)     { return p.x[i], p.y[i] }
func (p *plotPoints) YError(i int) (float64, float64) { return p.below[i], p.above[i] }

func seriesPoints(s Series, logX, logY bool) *plotPoints {
	p := &plotPoints{bars: len(s.YMin) == len(s.Y) && len(s.YMax) == len(s.Y)}
	for i := range min(len(s.X), len(s.Y)) {
		x, y := s.X[i], s.Y[i]
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) ||
			(logX && x <= 0) || (logY && y <= 0) {
			continue
		}
		below, above := 0.0, 0.0
		if p.bars {
			lo, hi := min(s.YMin[i], y), max(s.YMax[i], y)
			if logY && lo <= 0 {
				lo = y // a bar down to zero has no end on a log axis
			}
			below, above = y-lo, hi-y
		}
		p.x = append(p.x, x)
		p.y = append(p.y, y)
		p.below = append(p.below, below)
		p.above = append(p.above, above)
	}
	return p
}
