package kapi

import (
	"testing"
	"time"
)

// A watch is attached to one partition at a time: attached again to
// another (the partition was deleted and made again), the first no longer
// calls it; closed, none does. A follower's session counts for its own
// replica, at its position, while its clock runs.
func TestWatchMovesAndCounts(t *testing.T) {
	var a, b Watchers
	n := 0
	clock := new(FetchClock)
	w := NewWatch(func() { n++ }, 2, clock)
	a.Attach(w)
	a.Attach(w) // again: no second entry
	if a.Len() != 1 {
		t.Fatalf("attached twice: %d entries", a.Len())
	}
	b.Attach(w)
	a.Notify()
	if n != 0 || a.Len() != 0 || b.Len() != 1 {
		t.Fatalf("after moving: %d calls, %d and %d entries", n, a.Len(), b.Len())
	}
	b.Notify()
	if n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
	at := time.Unix(1000, 0)
	w.SetPosition(7)
	if got := b.CaughtUpAt(2, 7); !got.IsZero() {
		t.Fatalf("caught up at %v before the session fetched", got)
	}
	clock.Tick(at)
	if got := b.CaughtUpAt(2, 7); !got.Equal(at) {
		t.Fatalf("caught up at %v, want %v", got, at)
	}
	for _, c := range []struct {
		replica int32
		end     int64
	}{{3, 7}, {2, 8}, {2, 6}} {
		if got := b.CaughtUpAt(c.replica, c.end); !got.IsZero() {
			t.Fatalf("replica %d at log end %d: caught up at %v, want never", c.replica, c.end, got)
		}
	}
	clock.Stop()
	clock.Tick(at.Add(time.Second))
	if got := b.CaughtUpAt(2, 7); !got.IsZero() {
		t.Fatalf("a stopped clock still counts: %v", got)
	}
	w.Close()
	b.Notify()
	if n != 1 || b.Len() != 0 {
		t.Fatalf("after close: %d calls, %d entries", n, b.Len())
	}
}
