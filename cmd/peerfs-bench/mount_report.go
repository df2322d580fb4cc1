package main

import (
	"fmt"
	"io"
	"strings"
)

// values returns a target's samples of a workload in the workload's unit.
func (w *workloadResult) values(target string) []float64 {
	for _, t := range w.Targets {
		if t.Name != target {
			continue
		}
		var xs []float64
		for _, s := range t.Samples {
			if w.Unit == "s" {
				xs = append(xs, s.Seconds)
			} else {
				xs = append(xs, mibs(w.Bytes, s.Seconds))
			}
		}
		return xs
	}
	return nil
}

// speed is a median turned into "higher is faster": MiB/s as they are, seconds inverted.
func (w *workloadResult) speed(target string) (float64, bool) {
	xs := w.values(target)
	if len(xs) == 0 {
		return 0, false
	}
	m, _, _ := median(xs)
	if w.Unit == "s" {
		return 1 / m, m > 0
	}
	return m, true
}

func (w *workloadResult) cell(target string) string {
	xs := w.values(target)
	if len(xs) == 0 {
		return "-"
	}
	m, lo, hi := median(xs)
	if w.Unit == "s" {
		if len(xs) == 1 {
			return fmt.Sprintf("%.2f s", m)
		}
		return fmt.Sprintf("%.2f s (%.2f-%.2f)", m, lo, hi)
	}
	if len(xs) == 1 {
		return fmt.Sprintf("%.0f MiB/s", m)
	}
	return fmt.Sprintf("%.0f MiB/s (%.0f-%.0f)", m, lo, hi)
}

func (w *workloadResult) samples(target string) []mountSample {
	for _, t := range w.Targets {
		if t.Name == target {
			return t.Samples
		}
	}
	return nil
}

// mountTable is the workloads table of both the terminal report and the section.
func mountTable(r *mountReport) string {
	var b strings.Builder
	b.WriteString("| workload | peerfs | sshfs | native | peerfs/native | peerfs vs sshfs |\n|---|---|---|---|---|---|\n")
	for i := range r.Workloads {
		w := &r.Workloads[i]
		vsNative, vsSSHFS := "-", "-"
		if x, ok := w.ratio(tPeerfs, tNative); ok {
			vsNative = fmt.Sprintf("%.2f", x)
		}
		if x, ok := w.ratio(tPeerfs, tSSHFS); ok {
			vsSSHFS = fmt.Sprintf("%.2fx", x)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", w.Name, w.cell(tPeerfs), w.cell(tSSHFS), w.cell(tNative), vsNative, vsSSHFS)
	}
	return b.String()
}

// ratio is a's speed over b's: above 1, a is faster.
func (w *workloadResult) ratio(a, b string) (float64, bool) {
	x, okA := w.speed(a)
	y, okB := w.speed(b)
	if !okA || !okB || y == 0 {
		return 0, false
	}
	return x / y, true
}

func printMountReport(out io.Writer, r *mountReport) {
	fmt.Fprintf(out, "\n%s; %d MiB file, %d-file repository, %d creates, %d runs, medians (min-max)\n\n",
		r.Machine, r.Size>>20, r.Files, r.Creates, r.Runs)
	fmt.Fprint(out, mountTable(r))
	fmt.Fprintln(out, "\nRatios compare speed, so above 1 means peerfs is faster; for the timed rows they are the other's seconds over peerfs's.")
	for _, d := range mountDetails(r) {
		fmt.Fprintln(out, d)
	}
	if r.SSHFS != "" {
		fmt.Fprintf(out, "sshfs: %s\n", r.SSHFS)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

// mountDetails are the figures behind the table: the daemons' CPU, the write's call sizes,
// how the warm re-read was served.
func mountDetails(r *mountReport) []string {
	var out []string
	var cpu []string
	for i := range r.Workloads {
		w := &r.Workloads[i]
		var xs []float64
		for _, s := range w.samples(tPeerfs) {
			if w.Unit == "s" {
				xs = append(xs, s.CPUSeconds)
			} else {
				xs = append(xs, s.CPUSeconds/(float64(w.Bytes)/(1<<30)))
			}
		}
		if len(xs) == 0 {
			continue
		}
		m, _, _ := median(xs)
		if w.Unit == "s" {
			cpu = append(cpu, fmt.Sprintf("%s %.2f s", w.Key, m))
		} else {
			cpu = append(cpu, fmt.Sprintf("%s %.2f s/GiB", w.Key, m))
		}
	}
	if len(cpu) > 0 {
		out = append(out, fmt.Sprintf("peerfs daemons' CPU (both ends, medians): %s", strings.Join(cpu, ", ")))
	}
	for i := range r.Workloads {
		w := &r.Workloads[i]
		ss := w.samples(tPeerfs)
		switch w.Key {
		case "write":
			var calls, avg, owner, ownerAvg []float64
			for _, s := range ss {
				calls = append(calls, float64(s.WriteCalls))
				avg = append(avg, s.WriteAvgBytes)
				owner = append(owner, float64(s.OwnerWrites))
				ownerAvg = append(ownerAvg, s.OwnerWriteAvgByte)
			}
			if len(ss) == 0 || calls[0] == 0 {
				continue
			}
			c, _, _ := median(calls)
			a, _, _ := median(avg)
			o, _, _ := median(owner)
			oa, _, _ := median(ownerAvg)
			l := fmt.Sprintf("peerfs write (peerfs stats): cp made %.0f WRITE calls of %.0f KiB on average; %.0f writes of %.0f KiB on average went to the owner",
				c, a/1024, o, oa/1024)
			if r.Blksize[tPeerfs] > 0 {
				l += fmt.Sprintf("; st_blksize %d KiB", r.Blksize[tPeerfs]>>10)
				if r.Blksize[tSSHFS] > 0 {
					l += fmt.Sprintf(" (sshfs: %d KiB)", r.Blksize[tSSHFS]>>10)
				}
			}
			out = append(out, l)
		case "warm_read", "warm_read_later":
			pt := 0
			for _, s := range ss {
				if s.PassthroughOpens > 0 {
					pt++
				}
			}
			if len(ss) > 0 {
				out = append(out, fmt.Sprintf("peerfs %s: opened by FUSE passthrough in %d of %d runs", w.Name, pt, len(ss)))
			}
		}
	}
	return out
}

// mountSection is the mount benchmark's part of BENCHMARKS.md.
func mountSection(r *mountReport) *Section {
	var b strings.Builder
	b.WriteString(`Two real daemons on loopback; beta mounts alpha's share with ` + "`peerfs mount`" + `. sshfs mounts
the same folder through an OpenSSH server that the harness starts on 127.0.0.1 with temporary
keys. "native" works on the owner's folder directly. Cold reads start each run with beta's
chunk cache emptied (daemon restarted) and the owner's page cache for the file dropped.
Workloads run interleaved, in rotating order. Each run first times the disk itself along the
owner's paths (1 MiB O_DIRECT writes to a new file, 1 MiB O_DIRECT reads of the file with its
page cache dropped): the ceilings of the write through the mount and of its cold read.
Before each workload the harness syncs, so none pays for writing back what an earlier one
left dirty (on loopback that writeback would share the owner's disk).

`)
	fmt.Fprintf(&b, "%s file, %d-file repository, %d creates, %d runs, medians (min-max):\n\n", spelledSize(r.Size), r.Files, r.Creates, r.Runs)
	b.WriteString(mountTable(r))
	b.WriteString("\nRatios compare speed, so above 1 means peerfs is faster; for the timed rows the ratio is the\nother side's seconds over peerfs's.\n")
	if d := mountDetails(r); len(d) > 0 {
		b.WriteString("\nDetails from the same run:\n\n")
		for _, l := range d {
			b.WriteString("- " + l + ".\n")
		}
		if r.SSHFS != "" {
			b.WriteString("- sshfs options: " + r.SSHFS + ".\n")
		}
	}
	if reading := mountReading(r); len(reading) > 0 {
		b.WriteString("\nReading it:\n\n")
		for _, l := range reading {
			b.WriteString("- " + l + "\n")
		}
	}
	return &Section{
		Title:    "Mount: peerfs vs sshfs vs the native disk, same run",
		Markdown: b.String(),
		Notes:    r.Notes,
		Raw:      r,
	}
}

// mountReading derives the "reading it" list: where peerfs stands against sshfs and the
// native disk, workload by workload.
func mountReading(r *mountReport) []string {
	var ahead, behind []string
	var vsNative []string
	for i := range r.Workloads {
		w := &r.Workloads[i]
		if x, ok := w.ratio(tPeerfs, tSSHFS); ok {
			s := fmt.Sprintf("%s %.2fx", w.Key, x)
			if x >= 1 {
				ahead = append(ahead, s)
			} else {
				behind = append(behind, s)
			}
		}
		if x, ok := w.ratio(tPeerfs, tNative); ok {
			vsNative = append(vsNative, fmt.Sprintf("%s %.0f%%", w.Key, 100*x))
		}
	}
	var out []string
	switch {
	case len(ahead) > 0 && len(behind) == 0:
		out = append(out, fmt.Sprintf("**peerfs is ahead of sshfs on all %d workloads**: %s.", len(ahead), strings.Join(ahead, ", ")))
	case len(ahead) > 0 || len(behind) > 0:
		out = append(out, fmt.Sprintf("**peerfs against sshfs** (speed ratio): ahead on %s; behind on %s.",
			orNone(ahead), orNone(behind)))
	}
	if len(vsNative) > 0 {
		out = append(out, fmt.Sprintf("**Share of the native disk's speed**: %s.", strings.Join(vsNative, ", ")))
	}
	out = append(out, diskReading(r)...)
	return out
}

// diskRate is the median MiB/s of the disk reference samples, 0 without any.
func diskRate(size int64, ss []sample) float64 {
	var xs []float64
	for _, s := range ss {
		xs = append(xs, mibs(size, s.Seconds))
	}
	if len(xs) == 0 {
		return 0
	}
	m, _, _ := median(xs)
	return m
}

// diskReading compares the cold read and the write with what the disk itself gives along the
// same path: on loopback the owner's disk is the only disk, and the native columns go through
// the page cache, which these workloads through peerfs cannot use on the owner's side.
func diskReading(r *mountReport) []string {
	dw, dr := diskRate(r.Size, r.DiskWrite), diskRate(r.Size, r.DiskRead)
	if dw == 0 || dr == 0 {
		return nil
	}
	l := fmt.Sprintf("**The disk's own ceilings** in the same runs: O_DIRECT writes at %.0f MiB/s and cold O_DIRECT reads at %.0f MiB/s (1 MiB pieces, as the owner writes and reads)", dw, dr)
	var parts []string
	for i := range r.Workloads {
		w := &r.Workloads[i]
		v, ok := w.speed(tPeerfs)
		if !ok {
			continue
		}
		switch w.Key {
		case "cold_read":
			parts = append(parts, fmt.Sprintf("the cold read through peerfs reaches %.0f%% of the disk's cold read", 100*v/dr))
		case "write":
			parts = append(parts, fmt.Sprintf("the write through peerfs %.0f%% of its O_DIRECT write (native cp writes into the page cache and leaves the disk for later)", 100*v/dw))
		}
	}
	if len(parts) > 0 {
		l += "; " + strings.Join(parts, ", ")
	}
	return []string{l + "."}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
