package relay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSConnDeadlineSetAndCleared: a write deadline set to now and cleared at once, as
// crypto/tls does around close_notify, never fails a later write; a write after a deadline
// that stays passed fails with os.ErrDeadlineExceeded.
func TestWSConnDeadlineSetAndCleared(t *testing.T) {
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		nc := websocket.NetConn(r.Context(), c, websocket.MessageBinary)
		b, _ := io.ReadAll(nc)
		got <- b
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newWSConn(websocket.NetConn(context.Background(), ws, websocket.MessageBinary))
	var want []byte
	for i := range 200 {
		c.SetWriteDeadline(time.Now())
		c.SetWriteDeadline(time.Time{})
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // let any timer of the cleared deadline fire
		}
		msg := []byte{byte(i)}
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("write %d after a deadline set and cleared: %v", i, err)
		}
		want = append(want, msg...)
	}
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write([]byte("late")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write past a passed deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	c.SetWriteDeadline(time.Time{})
	c.Close()
	if b := <-got; string(b) != string(want) {
		t.Errorf("the other side read %d bytes, want %d", len(b), len(want))
	}
}
