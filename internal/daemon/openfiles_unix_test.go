//go:build unix

package daemon

import (
	"log/slog"
	"syscall"
	"testing"
)

// TestRaiseOpenFiles: a soft open-file limit below the hard one is raised to it.
func TestRaiseOpenFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	low := lim
	low.Cur = 1024
	if lim.Max <= low.Cur {
		t.Skipf("the hard limit (%d) leaves nothing to raise", lim.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower the limit: %v", err)
	}
	raiseOpenFiles(slog.New(slog.DiscardHandler))
	var got syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != lim.Max {
		t.Fatalf("soft limit %d after raiseOpenFiles, want the hard limit %d", got.Cur, lim.Max)
	}
}
