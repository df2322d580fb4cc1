package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The sshfs reference: an sshd of the benchmark's own on 127.0.0.1 and a random high port,
// configured entirely from files in the work directory (config, host key, authorized key, pid
// file); the system's /etc/ssh and the user's ~/.ssh are never read or written. sshfs mounts
// the owner's folder through it, in the foreground as a child of this process, so that it
// unmounts itself should the harness die (Pdeathsig) and is unmounted with fusermount3 -u
// otherwise.

// sshfsOptions are the options the sshfs column is measured with: sshfs's defaults, plus
// what it takes to log in without prompts or the user's configuration.
const sshfsOptions = "IdentitiesOnly=yes,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,LogLevel=ERROR"

// sshfsTools finds sshfs, sshd and ssh-keygen, or says what to install.
func sshfsTools() (sshfs, sshd, keygen string, missing error) {
	var need []string
	var err error
	if sshfs, err = exec.LookPath("sshfs"); err != nil {
		need = append(need, "sshfs")
	}
	// sshd re-executes itself and insists on an absolute path; it lives in /usr/sbin, which
	// is not on every user's PATH.
	if sshd, err = exec.LookPath("sshd"); err != nil || !filepath.IsAbs(sshd) {
		sshd = "/usr/sbin/sshd"
		if _, err := os.Stat(sshd); err != nil {
			need = append(need, "openssh-server")
		}
	}
	if keygen, err = exec.LookPath("ssh-keygen"); err != nil {
		need = append(need, "openssh-client")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		need = append(need, "fuse3")
	}
	if len(need) > 0 {
		return "", "", "", fmt.Errorf("not installed: %s (as root: scripts/bench-deps.sh, or apt-get install %s)",
			strings.Join(need, ", "), strings.Join(need, " "))
	}
	return sshfs, sshd, keygen, nil
}

// sshServer is a running sshd and what a client needs to log in to it.
type sshServer struct {
	dir   string // keys, config, pid file
	sshfs string
	port  int
	key   string // the client's private key
	user  string
	proc  *exec.Cmd
	done  chan struct{} // closed when sshd has exited
	notes []string
}

// startSSHD generates a host key and a client key under dir, writes an sshd_config there and
// starts sshd on 127.0.0.1 with a free high port. Call stop when done.
func startSSHD(ctx context.Context, dir string) (*sshServer, error) {
	sshfs, sshd, keygen, err := sshfsTools()
	if err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &sshServer{dir: dir, sshfs: sshfs, key: filepath.Join(dir, "client_key"), user: u.Username}
	hostKey := filepath.Join(dir, "host_key")
	for _, k := range []string{hostKey, s.key} {
		os.Remove(k)
		os.Remove(k + ".pub")
		if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "peerfs-bench", "-f", k).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v %s", err, out)
		}
	}
	pub, err := os.ReadFile(s.key + ".pub")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	// As root, sshd wants its privilege separation directory, which Debian creates at boot
	// only when the ssh service is enabled.
	if os.Geteuid() == 0 {
		if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
				return nil, fmt.Errorf("sshd needs /run/sshd: %w", err)
			}
			s.notes = append(s.notes, "created /run/sshd, sshd's privilege separation directory")
		}
	}
	for attempt := 0; ; attempt++ {
		if err := s.start(ctx, sshd, hostKey); err == nil || attempt == 4 || ctx.Err() != nil {
			return s, err
		}
	}
}

// start picks a free port and runs sshd on it in the foreground, returning once it accepts
// connections. A port taken between the pick and sshd's bind makes sshd exit; the caller
// retries with another.
func (s *sshServer) start(ctx context.Context, sshd, hostKey string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(s.dir, "sshd_config")
	cfg := fmt.Sprintf(`# Written by peerfs-bench for one run; nothing here is read from /etc/ssh.
ListenAddress 127.0.0.1
Port %d
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers %s
UsePAM no
Subsystem sftp internal-sftp
LogLevel ERROR
`, s.port, hostKey, filepath.Join(s.dir, "sshd.pid"), filepath.Join(s.dir, "authorized_keys"), s.user)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited: %s", strings.TrimSpace(stderr.String()))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("sshd did not listen on %s: %s", addr, strings.TrimSpace(stderr.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.proc, s.done = cmd, exited
	return nil
}

// stop ends sshd and its sessions: they share its process group.
func (s *sshServer) stop() {
	if s == nil || s.proc == nil {
		return
	}
	killGroup(s.proc, s.done)
	s.proc = nil
}

// killGroup sends SIGTERM to a child's process group and waits for the child, then SIGKILL
// after five seconds.
func killGroup(cmd *exec.Cmd, done <-chan struct{}) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// sshfsMount is one sshfs process serving one mount point.
type sshfsMount struct {
	dir    string
	proc   *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer
}

// mount mounts remote (a directory on this machine, served by s) at dir with sshfs in the
// foreground and returns once the mount is in place.
func (s *sshServer) mount(ctx context.Context, remote, dir string) (*sshfsMount, error) {
	return s.mountPort(ctx, s.port, remote, dir)
}

// addr is where sshd listens, for a proxy to put in front of it.
func (s *sshServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// mountPort is mount through another port of 127.0.0.1 that leads to this server, such as a
// proxy in front of it (the WAN benchmark's latency and rate limit).
func (s *sshServer) mountPort(ctx context.Context, port int, remote, dir string) (*sshfsMount, error) {
	m := &sshfsMount{dir: dir, done: make(chan struct{})}
	m.proc = exec.Command(s.sshfs, "-f", "-F", "/dev/null", "-p", strconv.Itoa(port),
		"-o", "IdentityFile="+s.key+","+sshfsOptions,
		s.user+"@127.0.0.1:"+remote, dir)
	m.proc.Stderr = &m.stderr
	m.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := m.proc.Start(); err != nil {
		return nil, fmt.Errorf("sshfs: %w", err)
	}
	go func() { m.proc.Wait(); close(m.done) }()
	for deadline := time.Now().Add(15 * time.Second); !mounted(dir); {
		select {
		case <-m.done:
			return nil, fmt.Errorf("sshfs exited before mounting: %s", strings.TrimSpace(m.stderr.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.unmount()
			return nil, fmt.Errorf("sshfs did not mount %s: %s", dir, strings.TrimSpace(m.stderr.String()))
		}
	}
	return m, nil
}

// unmount unmounts with fusermount3 -u (lazily if busy) and waits for sshfs to exit.
func (m *sshfsMount) unmount() error {
	if m == nil || m.proc == nil {
		return nil
	}
	var err error
	if mounted(m.dir) {
		if out, uerr := exec.Command("fusermount3", "-u", m.dir).CombinedOutput(); uerr != nil {
			err = fmt.Errorf("fusermount3 -u %s: %v %s", m.dir, uerr, bytes.TrimSpace(out))
			exec.Command("fusermount3", "-u", "-z", m.dir).Run()
		}
	}
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		killGroup(m.proc, m.done)
	}
	m.proc = nil
	return err
}
