package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestQuickDiscover runs "discover --quick" (one start of two daemons per network) and checks
// that each network produced a linked sample. It asserts no figures.
func TestQuickDiscover(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds both binaries and starts daemons in network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("the discover suite makes network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 (ip) not found")
	}
	bin := buildBinaries(t)
	var rep discoverReport
	decodeSection(t, runQuick(t, bin, "discover"), "discover", &rep)
	for _, network := range []string{discoverV4, discoverV6} {
		ss := rep.Networks[network]
		if len(ss) != 1 || ss[0].LinkedMs <= 0 {
			t.Errorf("%s: samples %+v, want one linked run", network, ss)
		}
	}
}
