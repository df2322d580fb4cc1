// Command peerfs-bench measures peerfs against references taken in the same run, on loopback:
//
//	peerfs-bench link [--size 1GiB] [--runs 3] [--dir DIR] [--peerfs BIN] [--out FILE]
//
// "link" moves one file of --size over plain TCP, over bare TLS 1.3 (crypto/tls with the
// exact configuration peerfs uses), over peerfs's TLS transport (the same, with record
// coalescing), and as a real "peerfs pull" between two daemons started for the purpose; it
// also times a native cp of the same file on the same disk, the ceiling for anything that
// writes the file. Each path runs --runs times, interleaved; it prints medians with min and
// max, CPU seconds per GiB (both ends), the ratios, and the daemons' peak RSS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "link" {
		fmt.Fprintln(os.Stderr, "usage: peerfs-bench link [--size 1GiB] [--runs 3] [--dir DIR] [--peerfs BIN] [--out FILE]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("link", flag.ExitOnError)
	var o linkOptions
	size := fs.String("size", "1GiB", "bytes to move per run (KiB, MiB, GiB suffixes)")
	fs.IntVar(&o.Runs, "runs", 3, "runs per path; medians are reported")
	fs.StringVar(&o.Dir, "dir", "", "work directory (default: a new one under $TMPDIR, removed at the end)")
	fs.StringVar(&o.Peerfs, "peerfs", "bin/peerfs", "the peerfs binary to benchmark")
	fs.StringVar(&o.Out, "out", "", "also write the results as JSON to this file")
	fs.Parse(os.Args[2:])
	var err error
	if o.Size, err = parseSize(*size); err != nil {
		fmt.Fprintln(os.Stderr, "peerfs-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runLink(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "peerfs-bench:", err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil && unit == "" {
		if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
			return 0, fmt.Errorf("bad size %q", s)
		}
	}
	switch unit {
	case "", "B":
	case "KiB", "K", "k":
		n <<= 10
	case "MiB", "M", "m":
		n <<= 20
	case "GiB", "G", "g":
		n <<= 30
	default:
		return 0, fmt.Errorf("bad size unit in %q", s)
	}
	return n, nil
}
