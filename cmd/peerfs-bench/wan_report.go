package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/peerfs/peerfs/internal/fusefs"
)

var wanWorkloads = []string{wColdRead, wFindGrep, wClone, wCreate}

func (r *wanReport) workloadName(key string) string {
	switch key {
	case wColdRead:
		return fmt.Sprintf("cold read, %s", spelledSize(r.Size))
	case wFindGrep:
		return fmt.Sprintf("find + grep -r, %d files", r.TreeFiles)
	case wClone:
		return fmt.Sprintf("git clone, %d files", r.Files)
	case wCreate:
		return fmt.Sprintf("create %d files of 4 KiB", r.Creates)
	}
	return key
}

// targets are the targets with results, peerfs first.
func (r *wanReport) targets() []string {
	var out []string
	for _, t := range []string{tPeerfs, tPeerfsJournal, tSSHFS} {
		for _, x := range r.Results {
			if x.Target == t {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// seconds returns the median, min and max seconds of one workload, target and condition.
func (r *wanReport) seconds(workload, target, cond string) (m, lo, hi float64, ok bool) {
	for _, x := range r.Results {
		if x.Workload == workload && x.Target == target && x.Condition == cond && len(x.Samples) > 0 {
			var xs []float64
			for _, s := range x.Samples {
				xs = append(xs, s.Seconds)
			}
			m, lo, hi = median(xs)
			return m, lo, hi, true
		}
	}
	return 0, 0, 0, false
}

// roundTrips is the median of a peerfs target's counted round trips for a workload under a
// condition.
func (r *wanReport) roundTrips(workload, target, cond string) (float64, bool) {
	return r.sampleMedian(workload, target, cond, func(s wanSample) float64 { return float64(s.RoundTrips) })
}

// drainSeconds is the median, min and max of the journaling mount's drain after a workload.
func (r *wanReport) drainSeconds(workload, cond string) (m, lo, hi float64, ok bool) {
	for _, x := range r.Results {
		if x.Workload == workload && x.Target == tPeerfsJournal && x.Condition == cond && len(x.Samples) > 0 {
			var xs []float64
			for _, s := range x.Samples {
				xs = append(xs, s.DrainSeconds)
			}
			m, lo, hi = median(xs)
			return m, lo, hi, true
		}
	}
	return 0, 0, 0, false
}

func (r *wanReport) sampleMedian(workload, target, cond string, of func(wanSample) float64) (float64, bool) {
	for _, x := range r.Results {
		if x.Workload == workload && x.Target == target && x.Condition == cond && len(x.Samples) > 0 {
			var xs []float64
			for _, s := range x.Samples {
				xs = append(xs, of(s))
			}
			m, _, _ := median(xs)
			return m, true
		}
	}
	return 0, false
}

// fitConditions are the conditions the slopes and plots use: the proxied ones when there
// are at least two, since loopback has neither the proxy nor the rate limit; otherwise all.
func (r *wanReport) fitConditions() []*wanCondition {
	var proxied []*wanCondition
	for _, c := range r.Conditions {
		if c.Proxied {
			proxied = append(proxied, c)
		}
	}
	if len(proxied) >= 2 {
		return proxied
	}
	return r.Conditions
}

// slope is the least-squares slope of a target's median seconds over the added round trip,
// in seconds per ms: times 1000, the number of round trips the workload waits for one after
// the other.
func (r *wanReport) slope(workload, target string) (float64, bool) {
	var xs, ys []float64
	for _, c := range r.fitConditions() {
		if m, _, _, ok := r.seconds(workload, target, c.Name); ok {
			xs = append(xs, float64(c.RTTms))
			ys = append(ys, m)
		}
	}
	if len(xs) < 2 {
		return 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0, false
	}
	return num / den, true
}

func wanCell(m, lo, hi float64, n int) string {
	if n == 1 {
		return fmt.Sprintf("%.2f s", m)
	}
	return fmt.Sprintf("%.2f s (%.2f-%.2f)", m, lo, hi)
}

// wanTimesTable has a row per workload and target, a column per condition, and a row with
// sshfs's seconds over peerfs's.
func wanTimesTable(r *wanReport) string {
	var b strings.Builder
	b.WriteString("| workload | target |")
	for _, c := range r.Conditions {
		b.WriteString(" " + c.Name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(r.Conditions)) + "\n")
	targets := r.targets()
	for _, w := range wanWorkloads {
		for _, t := range targets {
			fmt.Fprintf(&b, "| %s | %s |", r.workloadName(w), t)
			for _, c := range r.Conditions {
				if m, lo, hi, ok := r.seconds(w, t, c.Name); ok {
					b.WriteString(" " + wanCell(m, lo, hi, r.Runs) + " |")
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
		if slices.Contains(targets, tPeerfs) && slices.Contains(targets, tSSHFS) {
			fmt.Fprintf(&b, "| | sshfs / peerfs |")
			for _, c := range r.Conditions {
				p, _, _, okP := r.seconds(w, tPeerfs, c.Name)
				s, _, _, okS := r.seconds(w, tSSHFS, c.Name)
				if okP && okS && p > 0 {
					fmt.Fprintf(&b, " %.2fx |", s/p)
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wanRoundTripTable gives, per workload and target, what a millisecond of round trip costs
// and the number of round trips that implies, beside the round trips peerfs counted.
func wanRoundTripTable(r *wanReport) string {
	var b strings.Builder
	b.WriteString("| workload | target | s per ms of RTT | round trips waited for, one after the other | requests peerfs counted |\n|---|---|---|---|---|\n")
	last := r.Conditions[len(r.Conditions)-1]
	for _, w := range wanWorkloads {
		for _, t := range r.targets() {
			k, ok := r.slope(w, t)
			if !ok {
				continue
			}
			counted := "-"
			if n, ok := r.roundTrips(w, t, last.Name); ok && t != tSSHFS {
				counted = fmt.Sprintf("%.0f", n)
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.0f | %s |\n", r.workloadName(w), t, k, max(0, 1000*k), counted)
		}
	}
	return b.String()
}

// wanJournalTable compares, for the workloads that write, the journaling mount under each
// proxied condition with its own loopback time (the goal: within 3x at 50 ms), with and
// without the drain that follows, beside the round trips it waited for.
func wanJournalTable(r *wanReport) string {
	var b strings.Builder
	b.WriteString("| workload | condition | peerfs-journal | / its loopback | drain after it | with the drain, / loopback's | round trips waited for | peerfs (--writes sync) |\n|---|---|---|---|---|---|---|---|\n")
	rows := 0
	for _, w := range []string{wClone, wCreate} {
		base, _, _, okB := r.seconds(w, tPeerfsJournal, wanLoopback)
		baseDrain, _, _, _ := r.drainSeconds(w, wanLoopback)
		for _, c := range r.Conditions {
			m, lo, hi, ok := r.seconds(w, tPeerfsJournal, c.Name)
			if !ok {
				continue
			}
			d, dlo, dhi, _ := r.drainSeconds(w, c.Name)
			ratio, ratioDrained := "-", "-"
			if okB && base > 0 {
				ratio = fmt.Sprintf("%.1fx", m/base)
				ratioDrained = fmt.Sprintf("%.1fx", (m+d)/(base+baseDrain))
			}
			trips := "-"
			if n, ok := r.roundTrips(w, tPeerfsJournal, c.Name); ok {
				trips = fmt.Sprintf("%.0f", n)
			}
			sync := "-"
			if sm, slo, shi, ok := r.seconds(w, tPeerfs, c.Name); ok {
				sync = wanCell(sm, slo, shi, r.Runs)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.workloadName(w), c.Name, wanCell(m, lo, hi, r.Runs),
				ratio, wanCell(d, dlo, dhi, r.Runs), ratioDrained, trips, sync)
			rows++
		}
	}
	if rows == 0 {
		return ""
	}
	return b.String()
}

func wanConditionsTable(r *wanReport) string {
	var b strings.Builder
	b.WriteString("| condition | added RTT | rate limit per direction | RTT measured through the proxy (echo) | peerfs keepalive RTT, median (min-max) |\n|---|---|---|---|---|\n")
	for _, c := range r.Conditions {
		added, rate, echo := "none (no proxy)", "none", "-"
		if c.Proxied {
			added = fmt.Sprintf("%d ms", c.RTTms)
			if c.RateMbit > 0 {
				rate = fmt.Sprintf("%d Mbit/s", c.RateMbit)
			}
			echo = fmt.Sprintf("%.1f ms", c.EchoRTTms)
		}
		keep := "-"
		if len(c.PeerfsRTTms) > 0 {
			m, lo, hi := median(c.PeerfsRTTms)
			keep = fmt.Sprintf("%.1f ms (%.1f-%.1f)", m, lo, hi)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Name, added, rate, echo, keep)
	}
	return b.String()
}

func printWANReport(out io.Writer, r *wanReport) {
	fmt.Fprintf(out, "\n%s; %d runs, medians (min-max)\n\n", r.Machine, r.Runs)
	fmt.Fprint(out, wanTimesTable(r))
	fmt.Fprintln(out)
	fmt.Fprint(out, wanRoundTripTable(r))
	fmt.Fprintln(out)
	if t := wanJournalTable(r); t != "" {
		fmt.Fprint(out, t)
		fmt.Fprintln(out)
	}
	fmt.Fprint(out, wanConditionsTable(r))
	fmt.Fprintln(out)
	for _, l := range wanReading(r) {
		fmt.Fprintf(out, "- %s\n", strings.ReplaceAll(l, "**", ""))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

// wanPlotFile names the plot of one workload.
func wanPlotFile(workload string) string {
	return "wan-" + strings.ReplaceAll(workload, "_", "-") + ".png"
}

// wanPlots are seconds over the added round trip, one plot per workload, a series per target.
func wanPlots(r *wanReport) []Plot {
	var plots []Plot
	for _, w := range wanWorkloads {
		p := Plot{
			File:   wanPlotFile(w),
			Title:  r.workloadName(w) + ": time vs round trip",
			XLabel: "added round-trip time (ms)",
			YLabel: "seconds (median, min-max)",
		}
		for _, t := range r.targets() {
			s := Series{Name: t}
			for _, c := range r.fitConditions() {
				if m, lo, hi, ok := r.seconds(w, t, c.Name); ok {
					s.X = append(s.X, float64(c.RTTms))
					s.Y = append(s.Y, m)
					s.YMin = append(s.YMin, lo)
					s.YMax = append(s.YMax, hi)
				}
			}
			if len(s.X) > 0 {
				p.Series = append(p.Series, s)
			}
		}
		if len(p.Series) > 0 {
			plots = append(plots, p)
		}
	}
	return plots
}

// wanSection is the WAN benchmark's part of BENCHMARKS.md.
func wanSection(r *wanReport) *Section {
	var b strings.Builder
	b.WriteString(`The mount's key workloads with round-trip time and a rate limit between the two nodes. This
kernel has no netem, so the link is a TCP proxy in the benchmark's own process (the toxiproxy
Go library): a latency toxic of half the round trip on each direction, then a bandwidth toxic
on each direction. beta's peer entry for alpha points at the proxy; sshfs connects to a proxy
built the same way in front of the benchmark's sshd, so both see the same link. "loopback" is
the reference without a proxy.

Each target starts every condition cold: peerfs with beta restarted on an empty chunk cache and
a fresh mount, sshfs with a fresh mount; the owner's page cache for the file and the tree is
dropped before the reads. The tree is the one find and grep walk: leaf directories of about
100 files, sizes 200 B to 16 KiB. The cold read's file is smaller than the other suites' (set
with ` + "`--wan-size`" + `), because a reader with few requests in flight needs minutes for 1 GiB at 50 ms.

`)
	for _, c := range r.Conditions {
		if c.Proxied && c.RTTms == 0 {
			b.WriteString("\"0 ms\" is the proxy and its rate limit without latency: the difference from loopback is\nwhat they cost, and the slopes below start from it.\n\n")
			break
		}
	}
	if r.RateMbit > 0 {
		fmt.Fprintf(&b, "The rate limit is %d Mbit/s (%.0f MiB/s) per direction", r.RateMbit, float64(r.RateMbit)*1e6/8/(1<<20))
		if r.RateMbit == wanDefaultRate {
			b.WriteString(", the default: a gigabit link, and below what both\n" +
				"targets read at on loopback, so that behind the proxy the link and its round trips set the\n" +
				"pace rather than the CPU")
		}
		b.WriteString(".\n\n")
	}
	fmt.Fprintf(&b, "%s file; %d files in %d directories for find and grep; %d-file repository; %d creates; %d runs, medians (min-max), seconds:\n\n",
		spelledSize(r.Size), r.TreeFiles, r.TreeDirs, r.Files, r.Creates, r.Runs)
	b.WriteString(wanTimesTable(r))
	b.WriteString("\nWhat a round trip costs: the slope of each line below, fitted over ")
	var names []string
	for _, c := range r.fitConditions() {
		names = append(names, c.Name)
	}
	b.WriteString(strings.Join(names, ", ") + ". Seconds per millisecond of round trip equal the\n" +
		"number of round trips the workload waits for one after the other (times 1000). peerfs also\n" +
		"counts the requests it sent to the owner (`peerfs stats`, round_trips), many of them in\n" +
		"parallel.\n\n")
	b.WriteString(wanRoundTripTable(r))
	if t := wanJournalTable(r); t != "" {
		b.WriteString("\nThe journaling mount (`peerfs mount --writes journal`) against its own loopback time, and\n" +
			"the drain after each workload (an fsync of the mount: everything durable on the owner):\n\n")
		b.WriteString(t)
	}
	plots := wanPlots(r)
	if len(plots) > 0 {
		for _, p := range plots {
			b.WriteString("\n{{plot " + p.File + "}}\n")
		}
	}
	b.WriteString("\nThe link of each condition:\n\n")
	b.WriteString(wanConditionsTable(r))
	if reading := wanReading(r); len(reading) > 0 {
		b.WriteString("\nReading it:\n\n")
		for _, l := range reading {
			b.WriteString("- " + l + "\n")
		}
	}
	if r.SSHFS != "" {
		b.WriteString("\nsshfs: " + r.SSHFS + ".\n")
	}
	return &Section{
		Title:    "WAN: round-trip time and a rate limit between the nodes",
		Markdown: b.String(),
		Plots:    plots,
		Notes:    r.Notes,
		Raw:      r,
	}
}

// wanReading derives the "reading it" list from the figures.
func wanReading(r *wanReport) []string {
	var out []string
	last := r.Conditions[len(r.Conditions)-1]
	if !last.Proxied {
		return nil
	}
	targets := r.targets()
	for _, w := range wanWorkloads {
		var parts []string
		for _, t := range targets {
			lo, _, _, ok0 := r.seconds(w, t, wanLoopback)
			hi, _, _, ok1 := r.seconds(w, t, last.Name)
			if ok0 && ok1 {
				parts = append(parts, fmt.Sprintf("%s %.2f s on loopback, %.2f s at %s", t, lo, hi, last.Name))
			}
		}
		if len(parts) == 0 {
			continue
		}
		l := fmt.Sprintf("**%s**: %s", r.workloadName(w), strings.Join(parts, "; "))
		p, _, _, okP := r.seconds(w, tPeerfs, last.Name)
		s, _, _, okS := r.seconds(w, tSSHFS, last.Name)
		if okP && okS && p > 0 {
			l += fmt.Sprintf(" (sshfs takes %.1fx peerfs's time)", s/p)
		}
		out = append(out, l+".")
	}
	// Zero-RTT metadata: how many round trips find and grep wait for, per file.
	kp, okP := r.slope(wFindGrep, tPeerfs)
	ks, okS := r.slope(wFindGrep, tSSHFS)
	if okP {
		np := max(0, 1000*kp)
		l := fmt.Sprintf("**Metadata without round trips:** find and grep -r over %d files in %d directories wait for about %.0f round trips on peerfs (%.2f per file",
			r.TreeFiles, r.TreeDirs, np, np/float64(r.TreeFiles))
		if n, ok := r.roundTrips(wFindGrep, tPeerfs, last.Name); ok {
			l += fmt.Sprintf("; it counted %.0f requests", n)
		}
		l += ")"
		if okS {
			ns := max(0, 1000*ks)
			l += fmt.Sprintf(" and about %.0f on sshfs (%.2f per file)", ns, ns/float64(r.TreeFiles))
		}
		out = append(out, l+fmt.Sprintf(". peerfs's listings bring every file's attributes, and the contents of the %d files of at most %s (%.0f%% of the tree); the others cost one READ each.",
			r.TreeInline, spelledSize(fusefs.DefaultInline), 100*float64(r.TreeInline)/float64(r.TreeFiles)))
	}
	if r.Size > 0 {
		var parts []string
		for _, t := range targets {
			if m, _, _, ok := r.seconds(wColdRead, t, last.Name); ok && m > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f MiB/s", t, mibs(r.Size, m)))
			}
		}
		if len(parts) > 0 {
			l := fmt.Sprintf("**Cold read at %s**: %s", last.Name, strings.Join(parts, ", "))
			if last.RateMbit > 0 {
				l += fmt.Sprintf(", against a rate limit of %.0f MiB/s", float64(last.RateMbit)*1e6/8/(1<<20))
			}
			out = append(out, l+".")
		}
	}
	var checks []string
	for _, c := range r.Conditions {
		if c.Proxied && len(c.PeerfsRTTms) > 0 {
			m, _, _ := median(c.PeerfsRTTms)
			checks = append(checks, fmt.Sprintf("%d ms: %.1f ms echo, %.1f ms peerfs keepalive", c.RTTms, c.EchoRTTms, m))
		}
	}
	if len(checks) > 0 {
		out = append(out, "**The proxy adds the round trip it claims** (added, then measured): "+strings.Join(checks, "; ")+".")
	}
	return out
}
