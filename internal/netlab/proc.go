package netlab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command returns a command that runs name with args inside h's namespace.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Run runs name with args inside h's namespace and returns its combined output; a failure
// ends the test.
func (h *Host) Run(name string, args ...string) string {
	h.Lab.t.Helper()
	out, err := h.Command(name, args...).CombinedOutput()
	if err != nil {
		h.Lab.t.Fatalf("netlab: in %s: %s %s: %v: %s", h.Name, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out)
}

// Proc is a process that runs a registered Func inside a namespace.
type Proc struct {
	host  *Host
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout, line by line; closed at EOF
	done  chan struct{}
	err   error // of Wait; set before done closes

	stderr Output
	stop   sync.Once
}

// Start runs the function registered as fn (Register) in a copy of the test binary inside
// h's namespace, with args. The process is stopped when the test ends, if not before.
func (h *Host) Start(fn string, args ...string) *Proc {
	t := h.Lab.t
	t.Helper()
	if _, ok := funcs[fn]; !ok {
		t.Fatalf("netlab: no function %q registered (netlab.Register)", fn)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("netlab: finding the test binary: %v", err)
	}
	p := &Proc{host: h, name: fn, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd = h.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), envFunc+"="+fn)
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("netlab: starting %s in %s: %v", fn, h.Name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop() })
	return p
}

// Line returns the next line the process writes to stdout; if none comes within timeout, or
// the process ends first, the test ends with the process's stderr.
func (p *Proc) Line(timeout time.Duration) string {
	t := p.host.Lab.t
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if ok {
			return line
		}
		<-p.done
		t.Fatalf("netlab: %s in %s ended (%v) before writing a line; its stderr:\n%s", p.name, p.host.Name, p.err, p.stderr.String())
	case <-time.After(timeout):
		t.Fatalf("netlab: %s in %s wrote no line within %v; its stderr:\n%s", p.name, p.host.Name, timeout, p.stderr.String())
	}
	return ""
}

// Wait waits for the process to end by itself and returns its error, with its stderr.
func (p *Proc) Wait(timeout time.Duration) error {
	for range p.lines {
		// Lines nobody asked for are dropped.
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s in %s still running after %v: killed; its stderr:\n%s", p.name, p.host.Name, timeout, p.stderr.String())
	}
	if p.err != nil {
		return fmt.Errorf("%s in %s: %w; its stderr:\n%s", p.name, p.host.Name, p.err, p.stderr.String())
	}
	return nil
}

// Interrupt asks a process started with exec (a daemon in a lab host) to end with SIGINT, as
// ^C would, waits for it, and kills it if it has not ended after grace.
func Interrupt(cmd *exec.Cmd, grace time.Duration) {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}

// Stderr is what the process wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Stop asks the process to end (its ctx is cancelled: stdin closes), kills it after 5 s, and
// returns its exit error.
func (p *Proc) Stop() error {
	p.stop.Do(func() {
		p.stdin.Close()
		go func() {
			for range p.lines {
			}
		}()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p.err
}

// runChild runs the registered function name in this (re-executed) process.
func runChild(name string, args []string) int {
	fn, ok := funcs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "netlab: no function %q registered in this test binary\n", name)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		// The parent closes stdin to stop us, or by dying.
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := fn(ctx, args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// Output collects what a process in the lab writes (an exec.Cmd's Stdout or Stderr, written
// by exec's goroutine) for a test or benchmark to read while it runs. The zero Output is
// ready.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of what was written so far.
func (b *Output) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Reset forgets what was written.
func (b *Output) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// Conntrack lists the connection tracking entries of h's namespace (`conntrack -L`): what a
// router's NAT mapped, for the log of a failing test.
func (h *Host) Conntrack() string {
	out, err := h.Command("conntrack", "-L").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("conntrack -L in %s: %v: %s", h.Name, err, bytes.TrimSpace(out))
	}
	return string(out)
}
