package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDocsListEveryMetric: docs/METRICS.md has a table row for every metric a snapshot
// becomes, and no row for a metric that does not exist.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `(peerfs_[a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}

	full := sample
	full.Mounts = slices.Clone(sample.Mounts)
	full.Mounts[0].Counters = map[string]int64{}
	for name := range mountCounters {
		full.Mounts[0].Counters[name] = 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{fixed(full)})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	emitted := map[string]bool{}
	for _, f := range fams {
		emitted[f.GetName()] = true
		if !documented[f.GetName()] {
			t.Errorf("%s is not in docs/METRICS.md", f.GetName())
		}
	}
	for name := range documented {
		if !emitted[name] {
			t.Errorf("docs/METRICS.md lists %s, which is never served", name)
		}
	}
	if len(emitted) < 25 || !strings.Contains(string(doc), "histogram_quantile") {
		t.Errorf("only %d metrics, or no Grafana queries", len(emitted))
	}
}
