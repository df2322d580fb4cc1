//go:build !linux

package directio

import "os"

// Reader reads through the page cache where O_DIRECT is not supported.
type Reader struct{ f *os.File }

func NewReader(f *os.File) *Reader                        { return &Reader{f} }
func (r *Reader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r *Reader) Close() error                            { return nil }

// Writer writes through the page cache where O_DIRECT is not supported.
type Writer struct{ f *os.File }

func NewWriter(f *os.File) *Writer                         { return &Writer{f} }
func (w *Writer) WriteAt(p []byte, off int64) (int, error) { return w.f.WriteAt(p, off) }
func (w *Writer) Close() error                             { return nil }
