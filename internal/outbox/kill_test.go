package outbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const killChildEnv = "PEERFS_OUTBOX_KILL_CHILD"

// killChild runs in the child process of TestKill9: it starts a journal and adds ops until it
// is killed, printing each seq once Add has returned. Op seq's body is "k" and seq.
func killChild(dir string) {
	o, err := Open(Options{Dir: dir, Logger: quiet})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	out := bufio.NewWriterSize(os.Stdout, 0)
	for {
		seq, err := o.Add(writeOp(fmt.Sprint("k", o.Last()+1)))
		if err != nil {
			out.WriteString("add: " + err.Error() + "\n")
			os.Exit(2)
		}
		out.WriteString(strconv.FormatUint(seq, 10) + "\n")
	}
}

// kill -9 of the mount's daemon while it adds ops: after a restart every op it had added
// reaches the owner, once, in order, under the journal's ID.
func TestKill9(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("kill -9 test needs Unix signals")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	reported := uint64(0)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break // EOF once the child is dead; only whole lines count
		}
		seq, perr := strconv.ParseUint(strings.TrimSuffix(line, "\n"), 10, 64)
		if perr != nil {
			cmd.Process.Kill()
			t.Fatalf("child: %s", line)
		}
		reported = max(reported, seq)
		if seq == 3000 {
			cmd.Process.Kill() // SIGKILL on Unix, mid-add
		}
	}
	cmd.Wait()
	if reported < 3000 {
		t.Fatalf("the child reported %d ops before it died", reported)
	}

	w := newOwner()
	o := openT(t, Options{Dir: dir})
	last := o.Last()
	if last < reported {
		t.Fatalf("the journal holds %d ops, the child had added %d", last, reported)
	}
	run(t, o, w)
	if err := o.Sync(timeout(t), last); err != nil {
		t.Fatal(err)
	}
	want := make([]string, last)
	for i := range want {
		want[i] = fmt.Sprint("k", i+1)
	}
	w.check(t, want, false)
	t.Logf("killed after %d ops reported, %d in the journal", reported, last)
}
