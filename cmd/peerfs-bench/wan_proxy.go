package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// wanProxies are the WAN benchmark's links: toxiproxy proxies run in this process as a
// library (no toxiproxy server, no HTTP API), so they die with it, also on ^C.
type wanProxies struct {
	srv     *toxiproxy.ApiServer // only the logger and metrics the library's proxies need
	proxies []*wanProxy
}

// wanProxy is one running proxy in front of one upstream.
type wanProxy struct{ p *toxiproxy.Proxy }

func newWANProxies() *wanProxies {
	// Errors only: the library logs every accepted connection at Info.
	logger := zerolog.New(os.Stderr).Level(zerolog.ErrorLevel)
	return &wanProxies{srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)}
}

// start starts a proxy on a free port of 127.0.0.1 in front of upstream. A latency toxic
// delays each direction by half of rttMS (the odd millisecond goes downstream): toxiproxy's
// latency applies per direction, so 5 ms each way is a round trip of 10 ms. A bandwidth toxic
// then limits each direction to rateMbit (0: no limit). Latency comes first in each chain
// because the latency toxic measures its delay from when a chunk entered the proxy: behind
// the bandwidth toxic, the pacing would count as part of the latency.
func (w *wanProxies) start(upstream string, rttMS, rateMbit int) (*wanProxy, error) {
	p := toxiproxy.NewProxy(w.srv, fmt.Sprintf("wan-%d", len(w.proxies)), "127.0.0.1:0", upstream)
	var toxics []string
	for _, d := range []struct {
		stream string
		ms     int
	}{{"upstream", rttMS / 2}, {"downstream", rttMS - rttMS/2}} {
		if d.ms > 0 {
			toxics = append(toxics, fmt.Sprintf(`{"name":"latency_%[1]s","type":"latency","stream":"%[1]s","attributes":{"latency":%d}}`, d.stream, d.ms))
		}
	}
	if rateMbit > 0 {
		for _, stream := range []string{"upstream", "downstream"} {
			// The toxic's rate is in KB/s (1000 bytes, as bytes per millisecond).
			toxics = append(toxics, fmt.Sprintf(`{"name":"bandwidth_%[1]s","type":"bandwidth","stream":"%[1]s","attributes":{"rate":%d}}`, stream, rateMbit*1000/8))
		}
	}
	for _, t := range toxics {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			return nil, fmt.Errorf("toxiproxy: adding %s: %w", t, err)
		}
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy in front of %s: %w", upstream, err)
	}
	wp := &wanProxy{p}
	w.proxies = append(w.proxies, wp)
	return wp, nil
}

// addr is where the proxy listens.
func (wp *wanProxy) addr() string { return wp.p.Listen }

func (wp *wanProxy) port() int {
	_, port, _ := net.SplitHostPort(wp.p.Listen)
	n, _ := strconv.Atoi(port)
	return n
}

// stop closes the proxy's listener and every connection through it.
func (w *wanProxies) stop(wp *wanProxy) {
	wp.p.Stop()
	w.proxies = slices.DeleteFunc(w.proxies, func(x *wanProxy) bool { return x == wp })
}

func (w *wanProxies) close() {
	for _, wp := range slices.Clone(w.proxies) {
		w.stop(wp)
	}
}

// echoRTT measures the round trip of one byte through a proxy built like start's to an echo
// server in this process: the median of 7 exchanges, after a first one that also pays for the
// proxy's connection to its upstream. It checks that a condition adds the round trip it
// claims, independently of either target.
func (w *wanProxies) echoRTT(rttMS, rateMbit int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	wp, err := w.start(ln.Addr().String(), rttMS, rateMbit)
	if err != nil {
		return 0, err
	}
	defer w.stop(wp)
	c, err := net.DialTimeout("tcp", wp.addr(), 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Duration(20*rttMS+5000) * time.Millisecond))
	var rtts []float64
	b := []byte{'x'}
	for i := range 8 {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, fmt.Errorf("echo through the proxy: %w", err)
		}
		if i > 0 {
			rtts = append(rtts, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	m, _, _ := median(rtts)
	return m, nil
}
