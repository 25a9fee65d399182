package connrate

import (
	"strconv"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newTest(rate, burst, maxTracked int) (*Limiter, *clock) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := New(rate, burst, maxTracked)
	l.now = c.now
	l.lastSweep = c.t
	return l, c
}

// TestLimiterBurstAndRefill: an address gets its burst at once, is refused
// beyond it, and gets one connection back per 1/rate seconds; another
// address is unaffected.
func TestLimiterBurstAndRefill(t *testing.T) {
	l, c := newTest(5, 3, 0)
	for i := range 3 {
		if !l.Allow("10.0.0.1") {
			t.Fatalf("connection %d of a burst of 3 refused", i+1)
		}
	}
	if l.Allow("10.0.0.1") {
		t.Fatal("4th connection within the burst of 3 admitted")
	}
	if !l.Allow("10.0.0.2") {
		t.Fatal("another address refused")
	}
	c.add(199 * time.Millisecond)
	if l.Allow("10.0.0.1") {
		t.Fatal("admitted before 1/rate elapsed")
	}
	c.add(2 * time.Millisecond)
	if !l.Allow("10.0.0.1") || l.Allow("10.0.0.1") {
		t.Fatal("after 1/rate: want exactly one more connection")
	}
	c.add(10 * time.Second) // refills to the burst, not beyond
	for i := range 3 {
		if !l.Allow("10.0.0.1") {
			t.Fatalf("after a long pause, connection %d refused", i+1)
		}
	}
	if l.Allow("10.0.0.1") {
		t.Fatal("refilled beyond the burst")
	}
	var nilL *Limiter
	if New(0, 10, 0) != nil || !nilL.Allow("x") {
		t.Fatal("rate 0 must admit everything")
	}
}

// TestLimiterBoundedTracking: at most maxTracked addresses hold a bucket
// (new ones beyond are admitted untracked), and idle addresses are
// forgotten once refilled.
func TestLimiterBoundedTracking(t *testing.T) {
	l, c := newTest(10, 2, 100)
	for i := range 1000 {
		if !l.Allow("10.1." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)) {
			t.Fatalf("first connection of address %d refused", i)
		}
	}
	if n := l.Tracked(); n != 100 {
		t.Fatalf("tracked %d addresses, want the cap 100", n)
	}
	c.add(2 * time.Second) // every bucket refilled: all idle
	l.Allow("10.9.9.9")
	if n := l.Tracked(); n != 1 {
		t.Fatalf("after the idle sweep tracked %d addresses, want 1", n)
	}
}
