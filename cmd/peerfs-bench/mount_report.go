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

func printMountReport(out io.Writer, r *mountReport) {
	fmt.Fprintf(out, "\n%s; %d MiB file, %d-file repository, %d creates, %d runs, medians (min-max)\n\n",
		r.Machine, r.Size>>20, r.Files, r.Creates, r.Runs)
	fmt.Fprintln(out, "| workload | peerfs | sshfs | native | peerfs/native | peerfs vs sshfs |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for i := range r.Workloads {
		w := &r.Workloads[i]
		p, okP := w.speed(tPeerfs)
		s, okS := w.speed(tSSHFS)
		n, okN := w.speed(tNative)
		vsNative, vsSSHFS := "-", "-"
		if okP && okN {
			vsNative = fmt.Sprintf("%.2f", p/n)
		}
		if okP && okS {
			vsSSHFS = fmt.Sprintf("%.2fx", p/s)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", w.Name, w.cell(tPeerfs), w.cell(tSSHFS), w.cell(tNative), vsNative, vsSSHFS)
	}
	fmt.Fprintln(out, "\nRatios compare speed, so above 1 means peerfs is faster; for the timed rows they are the other's seconds over peerfs's.")

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
		fmt.Fprintf(out, "peerfs daemons' CPU (both ends, medians): %s\n", strings.Join(cpu, ", "))
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
			fmt.Fprintf(out, "peerfs write (peerfs stats): cp made %.0f WRITE calls of %.0f KiB on average; %.0f writes of %.0f KiB on average went to the owner",
				c, a/1024, o, oa/1024)
			if r.Blksize[tPeerfs] > 0 {
				fmt.Fprintf(out, "; st_blksize %d KiB", r.Blksize[tPeerfs]>>10)
				if r.Blksize[tSSHFS] > 0 {
					fmt.Fprintf(out, " (sshfs: %d KiB)", r.Blksize[tSSHFS]>>10)
				}
			}
			fmt.Fprintln(out)
		case "warm_read":
			pt := 0
			for _, s := range ss {
				if s.PassthroughOpens > 0 {
					pt++
				}
			}
			if len(ss) > 0 {
				fmt.Fprintf(out, "peerfs warm re-read: opened by FUSE passthrough in %d of %d runs\n", pt, len(ss))
			}
		}
	}
	if r.SSHFS != "" {
		fmt.Fprintf(out, "sshfs: %s\n", r.SSHFS)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}
