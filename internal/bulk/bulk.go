// Package bulk moves whole files over rpc push streams, as both ends of a transfer need it:
// the side that sends reads (and hashes) chunks ahead in one goroutine while another
// encrypts and sends them within the receiver's credit; the side that receives writes each
// chunk at its offset and hashes it in order, in two stages. The owner's GET and STREAM, its
// PUT, and the peer's pull and send all go through here. File data bypasses the page cache
// where that is cheaper (directio).
package bulk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/peerfs/peerfs/internal/directio"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// readahead is how many chunks Send reads (and hashes) ahead of the one being sent.
const readahead = 4

// ErrShrank is Send's error (in a ReadError) when the file ends before the range to send
// does.
var ErrShrank = errors.New("the file got shorter while it was sent")

// ReadError is Send's error when reading the file failed, as opposed to the stream failing.
// The stream is still alive then: the sender says why on it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// ErrOrder is Receive's error for a chunk that is not the next one expected or that goes
// beyond the announced size.
var ErrOrder = errors.New("stream data out of order or beyond the announced size")

// FileError is Receive's error when writing the file failed (a full disk, say), as opposed
// to the stream failing.
type FileError struct{ Err error }

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

type chunk struct {
	buf  *rpc.Buffer
	off  uint64
	data []byte // the file bytes in buf
}

// Send pushes [from, to) of f on out as DATA chunks of wire.MaxChunk. hash, if not nil, is
// fed every byte in order; moved, if not nil, is told of each chunk sent. It returns nil, a
// *ReadError (ErrShrank if the file ended early), or the stream's error: out is dead then,
// since the peer went away or cancelled.
func Send(ctx context.Context, out *rpc.OutStream, f *os.File, from, to uint64, hash io.Writer, moved func(int)) error {
	chunks := make(chan chunk, readahead)
	readErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		rd := directio.NewReader(f)
		defer rd.Close()
		for pos := from; pos < to; {
			n := min(uint64(wire.MaxChunk), to-pos)
			buf, err := out.GetChunk(int(n)) // within the link's read-ahead budget
			if err != nil {
				readErr <- err
				return
			}
			data := buf.Payload()[wire.DataHeaderLen:]
			if _, err := rd.ReadAt(data, int64(pos)); err != nil {
				buf.Release()
				if errors.Is(err, io.EOF) {
					err = ErrShrank
				}
				readErr <- err
				return
			}
			if hash != nil {
				hash.Write(data)
			}
			select {
			case chunks <- chunk{buf, pos, data}:
			case <-ctx.Done():
				buf.Release()
				readErr <- ctx.Err()
				return
			}
			pos += n
		}
		readErr <- nil
	}()
	var sendErr error
	for c := range chunks {
		if sendErr != nil {
			c.buf.Release()
			continue
		}
		n := len(c.data)
		if sendErr = out.Send(c.buf, c.off); sendErr == nil && moved != nil {
			moved(n)
		}
	}
	err := <-readErr
	switch {
	case sendErr != nil:
		return sendErr
	case err != nil:
		return &ReadError{err}
	}
	return nil
}

// Receive writes the chunks of in into f at their offsets, from pos up to at most limit
// bytes, and feeds them to hash in order: writing one chunk overlaps hashing the one before,
// and a chunk's buffer and credit go back once it is hashed. moved, if not nil, is told of
// each chunk written. It returns the offset after the last chunk written, and the stream's
// error, ErrOrder, or a *FileError.
func Receive(ctx context.Context, in *rpc.InStream, f *os.File, hash io.Writer, pos, limit uint64, moved func(int)) (uint64, error) {
	hashq := make(chan chunk, readahead)
	hashErr := make(chan error, 1)
	go func() {
		var err error
		for c := range hashq {
			if err != nil {
				c.buf.Release()
				continue
			}
			hash.Write(c.data)
			err = in.Consumed(c.buf, len(c.data))
		}
		hashErr <- err
	}()
	// Received files go straight to the disk where they can: no page-cache pages to
	// allocate and fill, and the reader's working set stays cached. (Hashing a chunk while it
	// is being written, still in the CPU's caches, measured slower than hashing it after:
	// the two contend for the same memory.)
	w := directio.NewWriter(f)
	defer w.Close()
	var err error
	for {
		buf, off, data, nerr := in.Next(ctx)
		if nerr != nil {
			if !errors.Is(nerr, io.EOF) {
				err = nerr
			}
			break
		}
		if off != pos || uint64(len(data)) > limit-pos {
			buf.Release()
			err = fmt.Errorf("%w: chunk of %d bytes at %d, expected one at %d, at most %d bytes in all",
				ErrOrder, len(data), off, pos, limit)
			break
		}
		if _, werr := w.WriteAt(data, int64(off)); werr != nil {
			buf.Release()
			err = &FileError{werr}
			break
		}
		pos += uint64(len(data))
		if moved != nil {
			moved(len(data))
		}
		hashq <- chunk{buf, off, data}
	}
	close(hashq)
	if herr := <-hashErr; err == nil {
		err = herr
	}
	return pos, err
}
