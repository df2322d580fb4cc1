package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Server limits.
const (
	// MaxRequestLen is the longest request line a server reads, in bytes. A request is a method
	// and a few names and paths; paths are at most 4 KiB (PATH_MAX), so 1 MiB is generous.
	MaxRequestLen = 1 << 20
	// requestTimeout bounds the wait for the request line: clients send it right after
	// connecting.
	requestTimeout = 10 * time.Second
	// writeTimeout bounds one line's write. A client that stops reading for this long is
	// treated as gone and its operation is canceled.
	writeTimeout = 30 * time.Second
	// eventQueue is how many events wait for the writer before progress events are dropped.
	// Progress is cumulative, so a dropped one loses nothing the next one does not carry.
	eventQueue = 64
)

// Serve answers calls on l with b until ctx is done or l fails. Each connection carries one
// call: a request line, then events, then one result or error line. An operation whose client
// disconnects has its ctx canceled. When ctx is done Serve closes l, cancels the calls in
// progress, waits for them and returns nil.
func Serve(ctx context.Context, l net.Listener, b Backend, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Deferred in this order so that the calls in progress are canceled before the wait.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting API connection: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(ctx, conn, b, log)
		}()
	}
}

// serveConn runs one call.
func serveConn(ctx context.Context, conn net.Conn, b Backend, log *slog.Logger) {
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	w := &lineWriter{conn: conn}
	req, err := readRequest(conn)
	if err != nil {
		log.Debug("api: bad request", "err", err)
		w.write(Line{Type: "error", Error: asAPIError(err)})
		return
	}

	// The client sends nothing after its request and keeps its side open until the answer, so
	// a read that ends (EOF, reset, or the Close below) means it hung up: the work is no
	// longer wanted. Stray bytes are ignored.
	go func() {
		var buf [64]byte
		for {
			if _, err := conn.Read(buf[:]); err != nil {
				cancel()
				return
			}
		}
	}()

	start := time.Now()
	result, err := dispatch(ctx, req, b, w, cancel)
	if err != nil {
		e := asAPIError(err)
		if e.Code == CodeInternal {
			log.Warn("api: call failed", "method", req.Method, "err", err)
		} else {
			log.Debug("api: call failed", "method", req.Method, "code", e.Code, "err", err)
		}
		w.write(Line{Type: "error", Error: e})
		return
	}
	log.Debug("api: call done", "method", req.Method, "elapsed", time.Since(start))
	w.write(Line{Type: "result", Result: result})
}

// rawRequest is a Request whose params are decoded once the method is known.
type rawRequest struct {
	API    int             `json:"api"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRequest reads and checks the request line.
func readRequest(conn net.Conn) (*rawRequest, error) {
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	defer conn.SetReadDeadline(time.Time{})

	// The request is the only thing a client sends, so reading ahead through a buffer loses
	// nothing; the disconnect watcher still sees the EOF or error that follows it.
	br := bufio.NewReader(io.LimitReader(conn, MaxRequestLen+1))
	line, err := br.ReadBytes('\n')
	if len(line) > MaxRequestLen {
		return nil, Errorf(CodeInvalid, "request longer than %d bytes", MaxRequestLen)
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, Errorf(CodeInvalid, "reading request: %v", err)
	}
	var req rawRequest
	if err := json.Unmarshal(bytes.TrimSpace(line), &req); err != nil {
		return nil, Errorf(CodeInvalid, "request is not valid JSON: %v", err)
	}
	if req.API != Version {
		return nil, Errorf(CodeInvalid, "API version %d is not supported (this daemon speaks %d): use the peerfs binary that matches the daemon", req.API, Version)
	}
	return &req, nil
}

// dispatch decodes the params for the method and calls the backend.
func dispatch(ctx context.Context, req *rawRequest, b Backend, w *lineWriter, cancel context.CancelFunc) (any, error) {
	switch req.Method {
	case MethodStatus:
		return b.Status(ctx)
	case MethodReload:
		return nil, b.Reload(ctx)
	case MethodList:
		var p ListParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return b.List(ctx, p)
	case MethodPull:
		var p PullParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return stream(ctx, w, cancel, func(emit func(Event)) (any, error) { return b.Pull(ctx, p, emit) })
	case MethodSend:
		var p SendParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return stream(ctx, w, cancel, func(emit func(Event)) (any, error) { return b.Send(ctx, p, emit) })
	case MethodMount:
		var p MountParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return b.Mount(ctx, p)
	case MethodUnmount:
		var p UnmountParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return nil, b.Unmount(ctx, p)
	case MethodMounts:
		return b.Mounts(ctx)
	case MethodStats:
		var p UnmountParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		return b.Stats(ctx, p)
	case MethodPair:
		var p PairParams
		if len(req.Params) > 0 {
			if err := decodeParams(req, &p); err != nil {
				return nil, err
			}
		}
		pr, ok := b.(Pairer)
		if !ok {
			return nil, Errorf(CodeInvalid, "this process does not pair devices: start the daemon with \"peerfs daemon\" and pair through it")
		}
		return stream(ctx, w, cancel, func(emit func(Event)) (any, error) { return pr.Pair(ctx, p, emit) })
	default:
		return nil, Errorf(CodeInvalid, "unknown method %q: use the peerfs binary that matches the daemon", req.Method)
	}
}

// decodeParams decodes params into p. Unknown fields are ignored: a newer client may send
// fields this daemon does not know.
func decodeParams(req *rawRequest, p any) error {
	if len(req.Params) == 0 || string(req.Params) == "null" {
		return Errorf(CodeInvalid, "method %q needs params", req.Method)
	}
	if err := json.Unmarshal(req.Params, p); err != nil {
		return Errorf(CodeInvalid, "params of %q: %v", req.Method, err)
	}
	return nil
}

// stream runs a long operation, forwarding its events to the client in the order emitted
// from one writer goroutine, so the backend never waits on the socket. Progress events are
// dropped while the queue is full; other events wait for room. Events emitted after op
// returns are discarded.
func stream(ctx context.Context, w *lineWriter, cancel context.CancelFunc, op func(emit func(Event)) (any, error)) (any, error) {
	events := make(chan Event, eventQueue)
	done := make(chan struct{})
	writerDone := make(chan struct{})

	go func() {
		defer close(writerDone)
		send := func(e Event) {
			if err := w.write(Line{Type: "event", Event: &e}); err != nil {
				cancel()
			}
		}
		for {
			select {
			case e := <-events:
				send(e)
			case <-done:
				for {
					select {
					case e := <-events:
						send(e)
					default:
						return
					}
				}
			}
		}
	}()

	emit := func(e Event) {
		if e.Type == "progress" {
			select {
			case events <- e:
			case <-done:
			default:
			}
			return
		}
		select {
		case events <- e:
		case <-done:
		case <-ctx.Done():
		}
	}

	result, err := op(emit)
	close(done)
	<-writerDone
	return result, err
}

// lineWriter writes Lines to the connection, one Write per line.
type lineWriter struct {
	mu     sync.Mutex
	conn   net.Conn
	failed bool
}

func (w *lineWriter) write(l Line) error {
	b, err := json.Marshal(l)
	if err != nil {
		b, _ = json.Marshal(Line{Type: "error", Error: Errorf(CodeInternal, "encoding reply: %v", err)})
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return net.ErrClosed
	}
	w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := w.conn.Write(b); err != nil {
		w.failed = true
		return err
	}
	return nil
}

// asAPIError turns err into the *Error sent to the client: an *Error in the chain as is,
// cancellation as CodeCanceled, anything else as CodeInternal with err's text.
func asAPIError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return Errorf(CodeCanceled, "operation canceled")
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
