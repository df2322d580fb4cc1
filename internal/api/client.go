package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrNoDaemon means no daemon serves the control socket.
var ErrNoDaemon = errors.New("peerfs daemon is not running")

// Client calls a daemon over its control socket. Each call uses its own connection. A Client
// may be used by several goroutines.
type Client struct {
	path string

	mu      sync.Mutex
	first   net.Conn  // the connection Dial made, for the first call; guarded by mu
	firstAt time.Time // when it was made
}

// firstConnMaxAge is how long the connection Dial made stays usable for the first call; it
// is well below the server's wait for a request line (requestTimeout).
const firstConnMaxAge = 3 * time.Second

// Dial connects to the daemon's socket at path. When nothing listens there the error wraps
// ErrNoDaemon and tells the user how to start one.
func Dial(path string) (*Client, error) {
	c := &Client{path: path}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.first, c.firstAt = conn, time.Now()
	return c, nil
}

func (c *Client) dial() (net.Conn, error) {
	conn, err := dialControl(c.path, 0)
	if err == nil {
		return conn, nil
	}
	if errNoListener(err) {
		return nil, fmt.Errorf("%w for this home (no socket at %s): start it with \"peerfs daemon\"", ErrNoDaemon, c.path)
	}
	return nil, fmt.Errorf("connecting to the daemon at %s: %w", c.path, err)
}

// Close releases the connection Dial made if no call used it.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first != nil {
		err := c.first.Close()
		c.first = nil
		return err
	}
	return nil
}

// Call runs method with params and decodes its result into result (a pointer, or nil to
// discard it). Events of a long operation are passed to onEvent, in order, on the calling
// goroutine; onEvent may be nil. A daemon error is returned as *Error. When ctx is done the
// connection is closed, which cancels the operation in the daemon, and ctx's error is
// returned.
func (c *Client) Call(ctx context.Context, method string, params, result any, onEvent func(Event)) error {
	c.mu.Lock()
	conn := c.first
	if conn != nil && time.Since(c.firstAt) > firstConnMaxAge {
		conn.Close()
		conn = nil
	}
	c.first = nil
	c.mu.Unlock()
	if conn == nil {
		var err error
		if conn, err = c.dial(); err != nil {
			return err
		}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	req, err := json.Marshal(Request{API: Version, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", method, err)
	}
	req = append(req, '\n')
	if _, err := conn.Write(req); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sending %s request to the daemon: %w", method, err)
	}

	dec := json.NewDecoder(conn)
	for {
		var l struct {
			Type   string          `json:"type"`
			Event  *Event          `json:"event"`
			Result json.RawMessage `json:"result"`
			Error  *Error          `json:"error"`
		}
		if err := dec.Decode(&l); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("the daemon closed the connection before answering %s: see its log", method)
			}
			return fmt.Errorf("reading the daemon's answer to %s: %w", method, err)
		}
		switch l.Type {
		case "event":
			if l.Event != nil && onEvent != nil {
				onEvent(*l.Event)
			}
		case "error":
			if l.Error == nil {
				return Errorf(CodeInternal, "the daemon answered %s with an empty error", method)
			}
			return l.Error
		case "result":
			if result == nil || len(l.Result) == 0 || string(l.Result) == "null" {
				return nil
			}
			if err := json.Unmarshal(l.Result, result); err != nil {
				return fmt.Errorf("decoding the daemon's answer to %s: %w", method, err)
			}
			return nil
		default:
			// A line type added after this client was built: skip it.
		}
	}
}
