package netlab

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// capNetAdmin is CAP_NET_ADMIN's bit in /proc/self/status's CapEff.
const capNetAdmin = 12

// unsupported says why the lab cannot run here, or "" when it can.
func unsupported() string {
	if !hasCap(capNetAdmin) {
		return "network namespaces need CAP_NET_ADMIN: run the test as root"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found: install iproute2 and nftables (make deps)"
		}
	}
	return ""
}

// hasCap reports whether this process holds capability bit in its effective set.
func hasCap(bit uint) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// interrupt ends tcpdump cleanly, so it flushes what it captured.
var interrupt = syscall.SIGINT
