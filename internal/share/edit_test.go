package share

import (
	"testing"
	"time"
)

// TestWriteLocksPerShare: a write held up in one share (its file's write lock taken) does not
// hold up a write to another share's file, whatever their inode numbers.
func TestWriteLocksPerShare(t *testing.T) {
	a, b := newFixture(t, false), newFixture(t, false)
	e, err := b.s.Stat("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	mu := a.s.writeLock(e.Ino) // the lock share a would take for a file of b's inode number
	mu.Lock()
	defer mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := b.s.Write("a.txt", 0, []byte("H"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to one share waited for a lock held in another")
	}
}
