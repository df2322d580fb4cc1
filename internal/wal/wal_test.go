package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// payload is the deterministic data of record seq, of a length that varies with seq.
func payload(seq uint64) []byte {
	n := int(seq*37%200) + 1
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq) ^ byte(i*7)
	}
	return b
}

func open(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func appendN(t testing.TB, l *Log, n int) {
	t.Helper()
	for range n {
		want := l.Next()
		seq, err := l.Append(payload(want))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if seq != want {
			t.Fatalf("Append got seq %d, want %d", seq, want)
		}
	}
}

// readAll reads every unacknowledged record, in small batches, and checks them against payload.
func readAll(t testing.TB, l *Log) []Record {
	t.Helper()
	var all []Record
	from := uint64(0)
	for {
		recs, err := l.Read(from, 7, 300)
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		if len(recs) == 0 {
			break
		}
		all = append(all, recs...)
		from = recs[len(recs)-1].Seq + 1
	}
	for i, r := range all {
		if i > 0 && r.Seq != all[i-1].Seq+1 {
			t.Fatalf("seq %d after %d", r.Seq, all[i-1].Seq)
		}
		if !bytes.Equal(r.Data, payload(r.Seq)) {
			t.Fatalf("record %d: data differs", r.Seq)
		}
	}
	return all
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 500})
	if l.Next() != 1 {
		t.Fatalf("first seq %d, want 1", l.Next())
	}
	appendN(t, l, 40)
	recs := readAll(t, l)
	if len(recs) != 40 || recs[0].Seq != 1 {
		t.Fatalf("read %d records from %d, want 40 from 1", len(recs), recs[0].Seq)
	}
	if n := len(segFiles(t, dir)); n < 5 {
		t.Fatalf("%d segments, want rollovers with SegmentBytes 500", n)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	st := l.Pending()
	var bytesWant int64
	for _, r := range recs {
		bytesWant += RecordHeaderLen + int64(len(r.Data))
	}
	if st.Records != 40 || st.Bytes != bytesWant || st.Oldest.IsZero() {
		t.Fatalf("Pending %+v, want 40 records, %d bytes, a time", st, bytesWant)
	}
	if err := l.Ack(25); err != nil {
		t.Fatal(err)
	}
	if recs := readAll(t, l); recs[0].Seq != 26 || len(recs) != 15 {
		t.Fatalf("after Ack(25) read from %d, %d records", recs[0].Seq, len(recs))
	}
	// Every remaining segment holds a record above 25.
	files := segFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("segments left %v", files)
	}
	var first uint64
	fmt.Sscanf(filepath.Base(files[1]), "%016x.wal", &first)
	if first <= 26 {
		t.Fatalf("second segment left starts at %d: wholly acknowledged segments kept: %v", first, files)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: the same records, seqs go on.
	l = open(t, dir, Options{SegmentBytes: 500})
	if l.Acked() != 25 || l.Next() != 41 {
		t.Fatalf("reopened: acked %d next %d, want 25 and 41", l.Acked(), l.Next())
	}
	if st2 := l.Pending(); st2.Records != 15 {
		t.Fatalf("reopened Pending %+v", st2)
	}
	appendN(t, l, 5)
	if recs := readAll(t, l); len(recs) != 20 || recs[0].Seq != 26 {
		t.Fatalf("reopened read %d records from %d", len(recs), recs[0].Seq)
	}

	// Acknowledge everything and close: no segment left, the seqs still go on.
	if err := l.Ack(45); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if files := segFiles(t, dir); len(files) != 0 {
		t.Fatalf("segments left after everything was acknowledged: %v", files)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	l = open(t, dir, Options{SegmentBytes: 500})
	if l.Next() != 46 || l.Acked() != 45 {
		t.Fatalf("after all segments deleted: next %d acked %d, want 46 and 45", l.Next(), l.Acked())
	}
	appendN(t, l, 1)
	l.Close()
	l = open(t, dir, Options{})
	defer l.Close()
	if recs := readAll(t, l); len(recs) != 1 || recs[0].Seq != 46 {
		t.Fatalf("got %v", recs)
	}
}

// With one record per segment, an Ack deletes every segment before the first unacknowledged
// record, while the log is open.
func TestAckDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 1})
	defer l.Close()
	appendN(t, l, 10)
	if n := len(segFiles(t, dir)); n != 10 {
		t.Fatalf("%d segments, want 10", n)
	}
	if err := l.Ack(7); err != nil {
		t.Fatal(err)
	}
	files := segFiles(t, dir)
	want := []string{"0000000000000008.wal", "0000000000000009.wal", "000000000000000a.wal"}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("segments after Ack(7): %v, want %v", got, want)
	}
	if err := l.Ack(11); err == nil {
		t.Fatal("Ack past the last record accepted")
	}
}

// lastRecordOffset returns the file and offset of the last record of the log in dir.
func lastRecordOffset(t *testing.T, dir string) (string, int64) {
	t.Helper()
	files := segFiles(t, dir)
	path := files[len(files)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off, last := int64(segHeaderLen), int64(-1)
	for off < int64(len(b)) {
		h, _ := parse(b[off:])
		last = off
		off += RecordHeaderLen + int64(h.length)
	}
	return path, last
}

func TestTornTail(t *testing.T) {
	src := t.TempDir()
	l := open(t, src, Options{SegmentBytes: 400})
	appendN(t, l, 12)
	l.Close()
	path, last := lastRecordOffset(t, src)
	full, _ := os.ReadFile(path)
	name := filepath.Base(path)
	files := segFiles(t, src)

	for cut := last; cut < int64(len(full)); cut++ {
		var logged bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logged, nil))
		dir := t.TempDir()
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if filepath.Base(f) == name {
				b = b[:cut]
			}
			os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600)
		}
		l, err := Open(dir, Options{SegmentBytes: 400, Logger: logger})
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if torn := bytes.Count(logged.Bytes(), []byte("torn tail")); torn != min(1, int(cut-last)) {
			t.Fatalf("cut at %d: logged %q", cut, logged.String())
		}
		if n := l.Next(); n != 12 {
			t.Fatalf("cut at %d: next %d, want 12", cut, n)
		}
		appendN(t, l, 1)
		l.Close()
		l = open(t, dir, Options{SegmentBytes: 400, Logger: logger})
		if recs := readAll(t, l); len(recs) != 12 {
			t.Fatalf("cut at %d: %d records after reopen, want 12", cut, len(recs))
		}
		if torn := bytes.Count(logged.Bytes(), []byte("torn tail")); torn > 1 {
			t.Fatalf("cut at %d: the torn tail is still there at the second Open: %q", cut, logged.String())
		}
		l.Close()
	}
}

// copyLog copies the log in src into a new directory, with fn applied to each file's bytes.
func copyLog(t *testing.T, src string, fn func(name string, b []byte) []byte) string {
	dir := t.TempDir()
	for _, f := range segFiles(t, src) {
		b, _ := os.ReadFile(f)
		name := filepath.Base(f)
		os.WriteFile(filepath.Join(dir, name), fn(name, b), 0o600)
	}
	return dir
}

func TestFlippedByte(t *testing.T) {
	src := t.TempDir()
	l := open(t, src, Options{SegmentBytes: 400})
	appendN(t, l, 12)
	l.Close()
	files := segFiles(t, src)
	lastName := filepath.Base(files[len(files)-1])
	_, lastOff := lastRecordOffset(t, src)

	t.Run("last record", func(t *testing.T) {
		dir := copyLog(t, src, func(name string, b []byte) []byte {
			if name == lastName {
				b[len(b)-1] ^= 0x40
			}
			return b
		})
		l, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("flipped byte in the last record: %v, want it dropped as torn", err)
		}
		defer l.Close()
		if l.Next() != 12 {
			t.Fatalf("next %d, want 12", l.Next())
		}
	})

	corrupt := func(t *testing.T, fn func(name string, b []byte) []byte, wantFile string) {
		dir := copyLog(t, src, fn)
		before := segFiles(t, dir)
		_, err := Open(dir, Options{})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("Open: %v, want a *CorruptError", err)
		}
		if filepath.Base(ce.File) != wantFile {
			t.Fatalf("error names %s, want %s", ce.File, wantFile)
		}
		t.Log(err)
		after := segFiles(t, dir)
		if !slices.Equal(before, after) {
			t.Fatalf("files changed: %v -> %v", before, after)
		}
		for _, f := range after {
			b, _ := os.ReadFile(f)
			if want := fn(filepath.Base(f), mustRead(t, filepath.Join(src, filepath.Base(f)))); !bytes.Equal(b, want) {
				t.Fatalf("%s changed by Open", f)
			}
		}
	}
	t.Run("followed by a good record", func(t *testing.T) {
		corrupt(t, func(name string, b []byte) []byte {
			if name == lastName {
				b[lastOff-1] ^= 0x40 // the last byte of the record before the last
			}
			return b
		}, lastName)
	})
	t.Run("length of a record followed by a good one", func(t *testing.T) {
		corrupt(t, func(name string, b []byte) []byte {
			if name == lastName {
				b[segHeaderLen+2] ^= 0x40 // the first record's length, far past the end
			}
			return b
		}, lastName)
	})
	t.Run("segment not the last", func(t *testing.T) {
		firstName := filepath.Base(files[0])
		corrupt(t, func(name string, b []byte) []byte {
			if name == firstName {
				b[len(b)-1] ^= 0x40
			}
			return b
		}, firstName)
	})
	t.Run("gap", func(t *testing.T) {
		dir := copyLog(t, src, func(name string, b []byte) []byte { return b })
		os.Remove(filepath.Join(dir, filepath.Base(files[1])))
		_, err := Open(dir, Options{})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("Open with a segment missing: %v, want a *CorruptError", err)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBudget(t *testing.T) {
	l := open(t, t.TempDir(), Options{BudgetBytes: 10 * (RecordHeaderLen + 100)})
	defer l.Close()
	rec := make([]byte, 100)
	for i := range 10 {
		if _, err := l.Append(rec); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if _, err := l.Append(rec); !errors.Is(err, ErrFull) {
		t.Fatalf("Append past the budget: %v, want ErrFull", err)
	}
	if _, err := l.Append(nil); !errors.Is(err, ErrFull) {
		t.Fatalf("empty record past the budget: %v, want ErrFull", err)
	}
	if err := l.Ack(3); err != nil {
		t.Fatal(err)
	}
	if st := l.Pending(); st.Bytes != 7*(RecordHeaderLen+100) {
		t.Fatalf("pending %d bytes after Ack(3)", st.Bytes)
	}
	for i := range 3 {
		if _, err := l.Append(rec); err != nil {
			t.Fatalf("Append %d after Ack: %v", i, err)
		}
	}
	if _, err := l.Append(rec); !errors.Is(err, ErrFull) {
		t.Fatalf("Append past the budget again: %v", err)
	}
}

// The budget counts the records replayed from disk too.
func TestBudgetAfterReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{BudgetBytes: 5 * (RecordHeaderLen + 10)}
	l := open(t, dir, opts)
	for range 5 {
		if _, err := l.Append(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
	}
	l.Ack(1)
	l.Close()
	l = open(t, dir, opts)
	defer l.Close()
	if _, err := l.Append(make([]byte, 10)); err != nil {
		t.Fatalf("Append within the budget: %v", err)
	}
	if _, err := l.Append(make([]byte, 10)); !errors.Is(err, ErrFull) {
		t.Fatalf("Append past the budget after reopen: %v", err)
	}
}

func TestWait(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), 1) }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned before an Append: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	appendN(t, l, 1)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- l.Wait(ctx, 2) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", err)
	}

	go func() { done <- l.Wait(context.Background(), 2) }()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	const writers, each = 8, 300
	l := open(t, t.TempDir(), Options{SegmentBytes: 4 << 10})
	defer l.Close()
	total := writers * each
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var err error
				if i%10 == 9 {
					_, err = l.AppendBatch([][]byte{fmt.Appendf(nil, "%d/%d", w, i), fmt.Appendf(nil, "%d/%d+", w, i)})
				} else {
					_, err = l.Append(fmt.Appendf(nil, "%d/%d", w, i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	total += writers * each / 10
	seen := map[string]bool{}
	lastOf := map[string]int{} // writer -> last i seen
	next := uint64(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for int(next) <= total {
		if err := l.Wait(ctx, next); err != nil {
			t.Fatalf("Wait(%d): %v", next, err)
		}
		recs, err := l.Read(next, 50, 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Seq != next {
				t.Fatalf("got seq %d, want %d", r.Seq, next)
			}
			if seen[string(r.Data)] {
				t.Fatalf("record %q twice", r.Data)
			}
			seen[string(r.Data)] = true
			var w, i int
			fmt.Sscanf(string(r.Data), "%d/%d", &w, &i)
			if prev, ok := lastOf[fmt.Sprint(w)]; ok && i < prev {
				t.Fatalf("writer %d: record %d after %d", w, i, prev)
			}
			lastOf[fmt.Sprint(w)] = i
			next++
		}
		if len(recs) > 0 && next%3 == 0 {
			if err := l.Ack(next - 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if len(seen) != total || l.Next() != uint64(total)+1 {
		t.Fatalf("%d distinct records, next %d, want %d", len(seen), l.Next(), total)
	}
	// Each writer's records arrive in the order it appended them.
	if err := l.Ack(uint64(total)); err != nil {
		t.Fatal(err)
	}
	if st := l.Pending(); st.Records != 0 || st.Bytes != 0 || !st.Oldest.IsZero() {
		t.Fatalf("Pending after acknowledging all: %+v", st)
	}
}

func TestCorruptErrorMessage(t *testing.T) {
	err := &CorruptError{File: "/d/wal/0000000000000001.wal", Offset: 42, What: "bad"}
	msg := err.Error()
	for _, want := range []string{"/d/wal/0000000000000001.wal", "byte 42", "cannot be read", "Nothing was deleted"} {
		if !bytes.Contains([]byte(msg), []byte(want)) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
