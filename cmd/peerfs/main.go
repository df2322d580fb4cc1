// Command peerfs shares folders between devices, end to end encrypted, peer to peer. See
// docs/CLI.md for its commands and exit codes.
//
// PEERFS_CPUPROFILE=FILE writes a Go CPU profile of the process to FILE (for performance work
// on the daemon: "go tool pprof FILE").
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/peerfs/peerfs/internal/cli"
)

func main() {
	if path := os.Getenv("PEERFS_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peerfs: PEERFS_CPUPROFILE:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		code := cli.Main(os.Args[1:])
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(cli.Main(os.Args[1:]))
}
