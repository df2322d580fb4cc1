package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tenSegments makes a log of 10 records, one per segment, and closes it.
func tenSegments(t *testing.T) string {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 1})
	appendN(t, l, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func setMark(t *testing.T, dir string, acked uint64) {
	if err := (&Log{dir: dir}).writeMark(acked, false); err != nil {
		t.Fatal(err)
	}
}

// An Ack that wrote its mark but was killed before deleting its segments: Open deletes them.
func TestReplayInterruptedAck(t *testing.T) {
	dir := tenSegments(t)
	setMark(t, dir, 7)
	l := open(t, dir, Options{SegmentBytes: 1})
	defer l.Close()
	if n := len(segFiles(t, dir)); n != 3 {
		t.Fatalf("%d segments after Open, want the 3 not acknowledged", n)
	}
	recs := readAll(t, l)
	if len(recs) != 3 || recs[0].Seq != 8 || l.Next() != 11 {
		t.Fatalf("read %d records from %v, next %d; want 8, 9, 10 and 11", len(recs), recs, l.Next())
	}
}

// A mark past the last record that survived (a power cut took records already acknowledged):
// nothing is handed out, and the seqs go on after the mark.
func TestReplayMarkPastEnd(t *testing.T) {
	dir := tenSegments(t)
	setMark(t, dir, 15)
	l := open(t, dir, Options{SegmentBytes: 1})
	if recs := readAll(t, l); len(recs) != 0 {
		t.Fatalf("handed out %d acknowledged records", len(recs))
	}
	if l.Next() != 16 {
		t.Fatalf("next %d, want 16", l.Next())
	}
	appendN(t, l, 2)
	l.Close()
	l = open(t, dir, Options{SegmentBytes: 1})
	defer l.Close()
	if recs := readAll(t, l); len(recs) != 2 || recs[0].Seq != 16 {
		t.Fatalf("after reopen: %v", recs)
	}
}

func TestReplayCorruptCases(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string){
		"first segment missing": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, segName(1)))
		},
		"bad mark": func(t *testing.T, dir string) {
			setMark(t, dir, 3)
			b := mustRead(t, filepath.Join(dir, markName))
			b[9] ^= 1
			os.WriteFile(filepath.Join(dir, markName), b, 0o600)
		},
		"bad segment name": func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, segName(10)), filepath.Join(dir, "a.wal"))
		},
		"bad magic": func(t *testing.T, dir string) {
			b := mustRead(t, filepath.Join(dir, segName(10)))
			b[0] = 'X'
			os.WriteFile(filepath.Join(dir, segName(10)), b, 0o600)
		},
		"record with the wrong seq": func(t *testing.T, dir string) {
			// The last segment holds record 9, whole, where 10 belongs: not a torn tail.
			b := mustRead(t, filepath.Join(dir, segName(9)))
			os.WriteFile(filepath.Join(dir, segName(10)), b, 0o600)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := tenSegments(t)
			damage(t, dir)
			before := segFiles(t, dir)
			_, err := Open(dir, Options{})
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			if after := segFiles(t, dir); len(after) != len(before) {
				t.Fatalf("files deleted: %v -> %v", before, after)
			}
		})
	}
}

// Read hands out a record larger than maxBytes alone, and records of mixed sizes whole.
func TestReadSizes(t *testing.T) {
	l := open(t, t.TempDir(), Options{SegmentBytes: 256 << 10})
	defer l.Close()
	sizes := []int{0, 5, 70000, 3, 200000, 1, 1, 65536, 0, 9}
	for i, n := range sizes {
		b := bytes.Repeat([]byte{byte(i + 1)}, n)
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	from := uint64(1)
	for from <= uint64(len(sizes)) {
		recs, err := l.Read(from, 100, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Fatalf("Read(%d) returned nothing", from)
		}
		total := 0
		for _, r := range recs {
			want := bytes.Repeat([]byte{byte(r.Seq)}, sizes[r.Seq-1])
			if r.Seq != from || !bytes.Equal(r.Data, want) {
				t.Fatalf("record %d (want %d): %d bytes, want %d", r.Seq, from, len(r.Data), len(want))
			}
			total += len(r.Data)
			from++
		}
		if len(recs) > 1 && total > 1000 {
			t.Fatalf("Read gave %d records of %d bytes, past maxBytes 1000", len(recs), total)
		}
	}
	// Random access, away from where the last Read stopped.
	for _, seq := range []uint64{7, 2, 10, 5} {
		recs, err := l.Read(seq, 1, 0)
		if err != nil || len(recs) != 1 || recs[0].Seq != seq || len(recs[0].Data) != sizes[seq-1] {
			t.Fatalf("Read(%d, 1, 0): %v %v", seq, recs, err)
		}
	}
}
