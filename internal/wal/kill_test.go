package wal

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const killChildEnv = "PEERFS_WAL_KILL_CHILD"

// killChild runs in the child process of TestKill9: it appends records until it is killed,
// printing each seq once Append has returned.
func killChild(dir string) {
	l, err := Open(dir, Options{SegmentBytes: 32 << 10})
	if err != nil {
		os.Stdout.WriteString("open: " + err.Error() + "\n")
		os.Exit(2)
	}
	out := bufio.NewWriterSize(os.Stdout, 0)
	for {
		seq, err := l.Append(payload(l.Next()))
		if err != nil {
			out.WriteString("append: " + err.Error() + "\n")
			os.Exit(2)
		}
		out.WriteString(strconv.FormatUint(seq, 10) + "\n")
	}
}

func TestKill9(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("kill -9 test needs Unix signals")
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Only whole lines count: the kill can cut the last one short.
		rd := bufio.NewReader(stdout)
		reported := uint64(0)
		killed := false
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				break // EOF once the child is dead; lines written before are read first
			}
			seq, perr := strconv.ParseUint(strings.TrimSuffix(line, "\n"), 10, 64)
			if perr != nil {
				cmd.Process.Kill()
				t.Fatalf("child: %s", line)
			}
			reported = max(reported, seq)
			if seq >= uint64(2000*(round+1)) && !killed {
				cmd.Process.Kill() // SIGKILL on Unix, mid-append
				killed = true
			}
		}
		if !killed {
			t.Fatalf("round %d: the child ended by itself", round)
		}
		cmd.Wait()

		l := open(t, dir, Options{SegmentBytes: 32 << 10})
		recs := readAll(t, l) // checks contiguity and every record's data
		if len(recs) == 0 || recs[0].Seq != 1 {
			t.Fatalf("round %d: log starts at %v", round, recs)
		}
		got := recs[len(recs)-1].Seq
		if got < reported {
			t.Fatalf("round %d: log ends at %d, the child had reported %d", round, got, reported)
		}
		if l.Next() != got+1 {
			t.Fatalf("round %d: next %d after last %d", round, l.Next(), got)
		}
		t.Logf("round %d: killed after %d reported, %d in the log", round, reported, got)
		l.Close()
	}
}
