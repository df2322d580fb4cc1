package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the metrics are served.
const Path = "/metrics"

// ErrNotLoopback is CheckAddr's refusal of an address other machines can reach.
var ErrNotLoopback = errors.New("not a loopback address")

// CheckAddr checks a metrics listen address: HOST:PORT whose host is a loopback address
// (127.0.0.0/8, ::1) or "localhost", unless public. The metrics name the peers and mount
// points and show the traffic; nothing in them is secret enough to encrypt, but the user
// decides who else sees them. An empty host ("":9100) means every interface, so it is
// public too.
func CheckAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address %q: want HOST:PORT, such as 127.0.0.1:7463: %v", addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port == "" || n == 0 && port != "0" {
		return fmt.Errorf("metrics address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if public || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	where := "host " + host
	if host == "" {
		where = "no host means every interface"
	}
	return fmt.Errorf("metrics address %q: %w (%s): other machines could read the metrics, which name "+
		"your peers and mount points; listen on 127.0.0.1:%s, or pass --metrics-public (\"metrics_public\": true "+
		"in the config file) to serve them there anyway", addr, ErrNotLoopback, where, port)
}

// Listen checks addr (CheckAddr) and binds it.
func Listen(addr string, public bool) (net.Listener, error) {
	if err := CheckAddr(addr, public); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w (is the port taken? choose another with --metrics)", addr, err)
	}
	return ln, nil
}

// Handler serves src's metrics, with the Go runtime's and the process's, in the
// Prometheus text (or OpenMetrics) format. Each handler has a registry of its own, so two
// nodes of one process (tests) do not mix.
func Handler(src Source, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collector{src})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{log},
		ErrorHandling:     promhttp.ContinueOnError, // a partial scrape beats none
		EnableOpenMetrics: true,
	})
}

// Serve serves the metrics on ln at Path until ctx is done, then closes ln and returns nil;
// an error if serving fails.
func Serve(ctx context.Context, ln net.Listener, src Source, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(src, log))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "peerfs metrics: %s\n", Path)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

// slogPrinter is promhttp's error log on a slog.Logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }
