package relay

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type connKind int

const (
	kindTLS connKind = iota
	kindWebSocket
	kindOther
	numKinds
	// kindUncounted: already counted (a WebSocket's inner TLS).
	kindUncounted = numKinds
)

var kindNames = [numKinds]string{"tls", "websocket", "other"}

type refusedReason int

const (
	refusedFull refusedReason = iota
	refusedToken
	refusedTimeout
	refusedReplaced
	refusedBadJoin
	refusedPerIP
	refusedConnCap
	numReasons
)

var reasonNames = [numReasons]string{"full", "token", "timeout", "replaced", "bad_join", "per_ip", "conn_cap"}

// stats are the relay's counters; Stats copies them, the metrics handler exports them.
type stats struct {
	conns         [numKinds]atomic.Int64
	refusals      [numReasons]atomic.Int64
	sessionsTotal atomic.Int64
	idleEnded     atomic.Int64
	bytes         atomic.Int64
}

func (st *stats) conn(k connKind) {
	if k < numKinds {
		st.conns[k].Add(1)
	}
}
func (st *stats) refused(r refusedReason) { st.refusals[r].Add(1) }

// Stats is a snapshot of a relay's counters.
type Stats struct {
	Connections map[string]int64 // by kind: tls, websocket, other
	Refusals    map[string]int64 // by reason
	Sessions    int64            // sessions paired since start
	Active      int              // sessions now
	Pending     int              // joins waiting now
	Open        int              // connections open now, in any state
	IdleEnded   int64            // sessions ended by the idle timeout
	Bytes       int64            // bytes spliced, both directions
}

// Stats returns the relay's counters.
func (s *Server) Stats() Stats {
	st := Stats{Connections: map[string]int64{}, Refusals: map[string]int64{},
		Sessions: s.stats.sessionsTotal.Load(), IdleEnded: s.stats.idleEnded.Load(), Bytes: s.stats.bytes.Load()}
	for k := range numKinds {
		st.Connections[kindNames[k]] = s.stats.conns[k].Load()
	}
	for r := range numReasons {
		st.Refusals[reasonNames[r]] = s.stats.refusals[r].Load()
	}
	s.mu.Lock()
	st.Active, st.Pending, st.Open = s.mu.sessions, s.mu.npending, len(s.mu.conns)
	s.mu.Unlock()
	return st
}

var (
	descConns    = prometheus.NewDesc("peerfs_relay_connections_total", "Connections accepted, by what they turned out to be.", []string{"kind"}, nil)
	descRefusals = prometheus.NewDesc("peerfs_relay_refusals_total", "Joins and connections refused, by reason.", []string{"reason"}, nil)
	descSessions = prometheus.NewDesc("peerfs_relay_sessions_total", "Sessions paired.", nil, nil)
	descActive   = prometheus.NewDesc("peerfs_relay_sessions", "Sessions now.", nil, nil)
	descPending  = prometheus.NewDesc("peerfs_relay_pending_joins", "Joins waiting for their partner now.", nil, nil)
	descOpen     = prometheus.NewDesc("peerfs_relay_open_connections", "Connections open now, in any state.", nil, nil)
	descIdle     = prometheus.NewDesc("peerfs_relay_idle_ended_total", "Sessions ended by the idle timeout.", nil, nil)
	descBytes    = prometheus.NewDesc("peerfs_relay_bytes_total", "Bytes spliced between devices, both directions.", nil, nil)
)

// collector exports Stats; it holds no state of its own.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descRefusals, descSessions, descActive, descPending, descOpen, descIdle, descBytes} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for k, v := range st.Connections {
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.CounterValue, float64(v), k)
	}
	for r, v := range st.Refusals {
		ch <- prometheus.MustNewConstMetric(descRefusals, prometheus.CounterValue, float64(v), r)
	}
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.CounterValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(st.Active))
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(descIdle, prometheus.CounterValue, float64(st.IdleEnded))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(st.Bytes))
}

// MetricsHandler serves the relay's counters, with the Go runtime's and the process's, for
// Prometheus.
func (s *Server) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collector{s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}
