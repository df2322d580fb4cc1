package netlab

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Capture records the packets crossing one interface (tcpdump, inside the namespace).
type Capture struct {
	host *Host
	cmd  *exec.Cmd
	out  Output // the pcap stream
	errs Output
	done chan error
	pcap []byte // after Stop
}

// Capture starts recording the packets on iface of h, whole packets, from now until Stop
// (or the end of the test). filter, if given, is a tcpdump filter expression. It skips the
// test without tcpdump.
func (h *Host) Capture(iface string, filter ...string) *Capture {
	t := h.Lab.t
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("netlab: tcpdump not found: install tcpdump (make deps) to capture traffic")
	}
	// --immediate-mode hands each packet to tcpdump as it comes (else the kernel holds
	// them for up to a second and an interrupt loses them: "9 packets received by filter,
	// 0 captured"); -U writes it at once; -w - keeps the file off the disk (and off
	// tcpdump's own sandbox rules about where it may write).
	args := append([]string{"-i", iface, "-n", "-U", "--immediate-mode", "-s", "0", "-w", "-"}, filter...)
	c := &Capture{host: h, cmd: h.Command("tcpdump", args...), done: make(chan error, 1)}
	c.cmd.Stdout = &c.out
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("netlab: starting tcpdump in %s: %v", h.Name, err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			c.errs.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), "listening on") {
				signalled = true
				close(ready)
			}
		}
		c.done <- c.cmd.Wait()
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("netlab: tcpdump on %s in %s did not start: %s", iface, h.Name, c.errs.String())
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// Stop ends the capture and returns it in pcap format.
func (c *Capture) Stop() []byte {
	if c.pcap != nil {
		return c.pcap
	}
	c.cmd.Process.Signal(interrupt)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	c.pcap = c.out.Bytes()
	if c.pcap == nil {
		c.pcap = []byte{}
	}
	return c.pcap
}

// Packets stops the capture and returns the captured packets (link-layer frames). It fails
// if the kernel dropped packets: a capture with holes proves no absence.
func (c *Capture) Packets() ([][]byte, error) {
	pcap := c.Stop()
	for _, line := range strings.Split(c.errs.String(), "\n") {
		if n, ok := strings.CutSuffix(strings.TrimSpace(line), " packets dropped by kernel"); ok && n != "0" {
			return nil, fmt.Errorf("tcpdump on %s: %s", c.host.Name, line)
		}
	}
	return ParsePcap(pcap)
}

// Contains stops the capture and reports whether any one packet holds b. A string split
// across two packets is not found: keep b shorter than a segment.
func (c *Capture) Contains(b []byte) (bool, error) {
	pkts, err := c.Packets()
	if err != nil {
		return false, err
	}
	for _, p := range pkts {
		if bytes.Contains(p, b) {
			return true, nil
		}
	}
	return false, nil
}

// ParsePcap splits a classic pcap file (either byte order, micro- or nanosecond stamps) into
// its packets.
func ParsePcap(b []byte) ([][]byte, error) {
	if len(b) < 24 {
		return nil, errors.New("pcap: shorter than its file header")
	}
	var order binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		order = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("pcap: unknown magic %#x", b[:4])
	}
	var pkts [][]byte
	for rest := b[24:]; len(rest) > 0; {
		if len(rest) < 16 {
			return pkts, errors.New("pcap: truncated record header")
		}
		n := int(order.Uint32(rest[8:12]))
		if len(rest) < 16+n {
			return pkts, errors.New("pcap: truncated packet")
		}
		pkts = append(pkts, rest[16:16+n])
		rest = rest[16+n:]
	}
	return pkts, nil
}
