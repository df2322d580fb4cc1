package relay

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The same relay protocol runs inside a WebSocket, for networks that let out only HTTPS: a
// device sends "GET /relay" with an upgrade, either inside the relay's own TLS (ALPN
// http/1.1 on the relay's port, the device pinning the relay's ID as for raw TLS) or in
// clear to a TLS-terminating proxy in front of the relay. The WebSocket carries binary
// messages; their payloads, concatenated, are the byte stream a raw TCP connection would
// carry (the relay's TLS, the join, then the spliced bytes). The relay copies a WebSocket
// side through a user buffer: no splice(2) there.
const (
	// wsMaxMessage bounds a WebSocket message either side accepts; wsWriteMax is the most
	// either side puts in one.
	wsMaxMessage = 1 << 20
	wsWriteMax   = 256 << 10
)

// serveWebSocket upgrades a request on WebSocketPath and runs the relay protocol in it.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request with the reason
	}
	c.SetReadLimit(wsMaxMessage)
	// The request's context ends when this handler returns, which is when the session ends.
	nc := newWSConn(websocket.NetConn(r.Context(), c, websocket.MessageBinary))
	defer nc.Close()
	observed, _ := netip.ParseAddrPort(r.RemoteAddr)
	observed = netip.AddrPortFrom(observed.Addr().Unmap(), observed.Port())
	s.handleTLS(nc, nil, observed, kindUncounted)
}

// wsConn splits large writes so no message passes wsWriteMax, and keeps write deadlines
// itself. coder/websocket's NetConn turns a deadline into a timer that closes the connection
// for writing; a callback already started can run after the deadline was cleared, failing
// every later write. crypto/tls sets a write deadline of now after sending close_notify and
// the relay clears it right away, which lost the inner TLS's writes about once in four runs.
// Here a write after a deadline that has passed fails with os.ErrDeadlineExceeded, and only a
// write still blocked when its deadline passes is cut, through NetConn (the connection is then
// done for writing, as a partial write leaves it anyway).
type wsConn struct {
	net.Conn
	mu            sync.Mutex
	writeDeadline time.Time
	timer         *time.Timer
	writing       int // writes in progress
}

func newWSConn(c net.Conn) *wsConn { return &wsConn{Conn: c} }

func (c *wsConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = t
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !t.IsZero() {
		c.timer = time.AfterFunc(time.Until(t), func() {
			c.mu.Lock()
			cut := c.writeDeadline.Equal(t) && c.writing > 0
			c.mu.Unlock()
			if cut {
				c.Conn.SetWriteDeadline(time.Unix(0, 1))
			}
		})
	}
	return nil
}

func (c *wsConn) SetDeadline(t time.Time) error {
	c.SetWriteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *wsConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if d := c.writeDeadline; !d.IsZero() && !time.Now().Before(d) {
		c.mu.Unlock()
		return 0, os.ErrDeadlineExceeded
	}
	c.writing++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.writing--
		c.mu.Unlock()
	}()
	n := 0
	for len(b) > 0 {
		m := min(len(b), wsWriteMax)
		k, err := c.Conn.Write(b[:m])
		n += k
		if err != nil {
			return n, err
		}
		b = b[m:]
	}
	return n, nil
}

// dialWebSocket opens the WebSocket to u: inside the relay's TLS (pinned to u.ID) when
// secure, else in clear to u.Host (a proxy that terminates TLS is expected there).
func dialWebSocket(ctx context.Context, u URL, secure bool, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	tr := &http.Transport{DialContext: dial, ForceAttemptHTTP2: false}
	scheme := "ws"
	if secure {
		scheme = "wss"
		tr.TLSClientConfig = clientTLS(u, alpnHTTP)
	}
	defer tr.CloseIdleConnections()
	c, _, err := websocket.Dial(ctx, scheme+"://"+u.Host+WebSocketPath, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(wsMaxMessage)
	// The stream lives until the caller closes it, not until ctx ends.
	return newWSConn(websocket.NetConn(context.Background(), c, websocket.MessageBinary)), nil
}
