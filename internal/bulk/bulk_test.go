package bulk

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// Both ends of the tests run over a real link: TLS on loopback TCP (sharetest.Serve). The
// sending side is a handler that pushes [from, to) of its file with Send; the receiving side
// opens the stream and writes it into a file of its own with Receive.

const window = 4 << 20 // four chunks of credit: the sender waits for it many times

// sender pushes the range req asks for of file on every request and reports Send's result and
// the hash of what it read.
type sender struct {
	file     string
	from, to uint64
	done     chan sent
}

type sent struct {
	err error
	sum []byte
}

func (s *sender) ServeRequest(r *rpc.Request) {
	f, err := os.Open(s.file)
	if err != nil {
		r.Fail(wire.EIO, err.Error())
		s.done <- sent{err: err}
		return
	}
	defer f.Close()
	out, err := r.Push(nil, window)
	if err != nil {
		s.done <- sent{err: err}
		return
	}
	h := blake3.New()
	err = Send(r.Context(), out, f, s.from, s.to, h, nil)
	if err == nil {
		out.End(nil)
	} else {
		r.Fail(wire.ErrnoChanged, err.Error())
	}
	s.done <- sent{err: err, sum: h.Sum(nil)}
}

// link serves s and opens its stream, returning the receiving end.
func link(t *testing.T, s *sender) *rpc.InStream {
	t.Helper()
	s.done = make(chan sent, 1)
	p := sharetest.Serve(t, s)
	head, in, err := p.S.OpenInStream(context.Background(), wire.OpGet, nil, window)
	if err != nil {
		t.Fatal(err)
	}
	head.Release()
	t.Cleanup(in.Close)
	return in
}

func randomFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 7))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	name := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name, data
}

// TestSendReceive moves a file of several chunks, whole and from an offset within a chunk (a
// resumed transfer): the receiver's file holds the range at its offsets, and both ends hashed
// the same bytes.
func TestSendReceive(t *testing.T) {
	const size = 5<<20 + 4321
	src, data := randomFile(t, size)
	for _, from := range []uint64{0, 1<<20 + 7} {
		s := &sender{file: src, from: from, to: size}
		in := link(t, s)
		dst, err := os.Create(filepath.Join(t.TempDir(), "dst"))
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Close()
		h := blake3.New()
		moved := 0
		pos, err := Receive(context.Background(), in, dst, h, from, size, func(n int) { moved += n })
		if err != nil || pos != size {
			t.Fatalf("from %d: Receive = %d, %v", from, pos, err)
		}
		got := <-s.done
		if got.err != nil {
			t.Fatalf("from %d: Send: %v", from, got.err)
		}
		if !bytes.Equal(got.sum, h.Sum(nil)) {
			t.Errorf("from %d: the ends hashed different bytes", from)
		}
		if want := blake3.Sum256(data[from:]); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Errorf("from %d: hash of the received bytes is wrong", from)
		}
		buf := make([]byte, size-from)
		if _, err := dst.ReadAt(buf, int64(from)); err != nil || !bytes.Equal(buf, data[from:]) {
			t.Errorf("from %d: the received file differs (%v)", from, err)
		}
		if moved != int(size-from) {
			t.Errorf("from %d: moved told of %d bytes, want %d", from, moved, size-from)
		}
	}
}

// TestSendShrank: a file that ends before the range it is asked for is a *ReadError holding
// ErrShrank on the sending side, which says so on the stream, and the receiver gets an error.
func TestSendShrank(t *testing.T) {
	const size = 2<<20 + 10
	src, _ := randomFile(t, size)
	s := &sender{file: src, to: size + 1<<20}
	in := link(t, s)
	dst, err := os.Create(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	_, rerr := Receive(context.Background(), in, dst, blake3.New(), 0, size+1<<20, nil)
	got := <-s.done
	var re *ReadError
	if !errors.As(got.err, &re) || !errors.Is(got.err, ErrShrank) {
		t.Fatalf("Send = %v, want a ReadError with ErrShrank", got.err)
	}
	var remote *wire.RemoteError
	if !errors.As(rerr, &remote) || remote.Code != wire.ErrnoChanged {
		t.Fatalf("Receive = %v, want the sender's CHANGED", rerr)
	}
}

// TestReceiveRefusesMore: chunks beyond the size the receiver expects are refused with
// ErrOrder, and nothing past that size is written.
func TestReceiveRefusesMore(t *testing.T) {
	const size = 3 << 20
	src, _ := randomFile(t, size)
	in := link(t, &sender{file: src, to: size})
	dst, err := os.Create(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	pos, err := Receive(context.Background(), in, dst, blake3.New(), 0, 1<<20+1, nil)
	if !errors.Is(err, ErrOrder) {
		t.Fatalf("Receive = %d, %v, want ErrOrder", pos, err)
	}
	if fi, _ := dst.Stat(); fi.Size() > 1<<20+1 {
		t.Errorf("%d bytes written, limit %d", fi.Size(), 1<<20+1)
	}
}
