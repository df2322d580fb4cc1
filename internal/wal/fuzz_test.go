package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReplay feeds arbitrary bytes as a segment file to Open: it never panics, and either
// refuses the log with a *CorruptError or opens one whose records all verify, that appends
// after them, and that reopens to the same records.
func FuzzReplay(f *testing.F) {
	src := f.TempDir()
	l, err := Open(src, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		l.Append(payload(seq))
	}
	l.Close()
	seg, err := os.ReadFile(filepath.Join(src, segName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add(seg[:segHeaderLen])
	f.Add(seg[:3])
	f.Add([]byte{})
	f.Add(append(bytes.Clone(seg), make([]byte, 100)...))

	quiet := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			return
		}
		recs, err := l.Read(1, 1<<20, 1<<30)
		if err != nil {
			t.Fatalf("Read after a clean Open: %v", err)
		}
		for i, r := range recs {
			if r.Seq != uint64(i)+1 {
				t.Fatalf("record %d has seq %d", i, r.Seq)
			}
		}
		if l.Next() != uint64(len(recs))+1 {
			t.Fatalf("next %d after %d records", l.Next(), len(recs))
		}
		if _, err := l.Append([]byte("after")); err != nil {
			t.Fatalf("Append: %v", err)
		}
		l.Close()
		l, err = Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatalf("reopen after a clean Open and an Append: %v", err)
		}
		defer l.Close()
		again, err := l.Read(1, 1<<20, 1<<30)
		if err != nil || len(again) != len(recs)+1 || string(again[len(recs)].Data) != "after" {
			t.Fatalf("reopened: %d records (%v), want %d", len(again), err, len(recs)+1)
		}
		for i, r := range recs {
			if !bytes.Equal(r.Data, again[i].Data) {
				t.Fatalf("record %d differs after reopen", r.Seq)
			}
		}
	})
}
