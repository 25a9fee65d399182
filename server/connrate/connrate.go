// Package connrate limits how fast one client address may open
// connections (Kafka's max.connection.creation.rate per IP, KIP-612): a
// token bucket per address, refilled at the rate, holding a small burst.
// The count limits (open connections per address) cannot stop a client
// that opens and closes connections in a loop; this does. The server wraps
// both client doors (Kafka, HTTP) with one Limiter each.
//
// Memory is bounded without a goroutine: a bucket that has refilled to
// its burst is the same as no bucket, so such buckets are dropped at most
// once a second, and at most MaxTracked addresses are tracked; beyond that
// a new address is admitted untracked (the open-connection caps still
// bound it) rather than refused, so that a crowd of legitimate clients is
// never locked out by the table being full.
package connrate

import (
	"sync"
	"time"
)

// DefaultMaxTracked bounds the addresses a Limiter tracks (about 100 bytes
// each).
const DefaultMaxTracked = 10000

// sweepEvery spaces the sweeps of refilled buckets, so that the cost of a
// sweep (one pass over the table) is paid at most once a second.
const sweepEvery = time.Second

// Limiter admits at most Rate new connections per second per address,
// after a burst of Burst. Safe for concurrent use.
type Limiter struct {
	rate       float64
	burst      float64
	maxTracked int
	now        func() time.Time // the clock; tests replace it

	mu        sync.Mutex // guards the fields below; held for map work only
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns a limiter of rate connections per second per address with a
// burst of burst (at least 1), tracking at most maxTracked addresses
// (0: DefaultMaxTracked). rate <= 0 returns nil, which admits everything.
func New(rate, burst, maxTracked int) *Limiter {
	if rate <= 0 {
		return nil
	}
	if maxTracked <= 0 {
		maxTracked = DefaultMaxTracked
	}
	return &Limiter{rate: float64(rate), burst: float64(max(burst, 1)), maxTracked: maxTracked,
		now: time.Now, buckets: map[string]*bucket{}}
}

// Allow takes one token for addr and reports whether a new connection from
// it is admitted. A refused attempt takes nothing, so a client that backs
// off is admitted again after 1/rate seconds. A nil Limiter admits all.
func (l *Limiter) Allow(addr string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= l.maxTracked {
			return true
		}
		l.buckets[addr] = &bucket{tokens: l.burst - 1, last: now}
		return true
	}
	b.refill(now, l)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tracked is the number of addresses holding a bucket (for tests and
// metrics).
func (l *Limiter) Tracked() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func (b *bucket) refill(now time.Time, l *Limiter) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(l.burst, b.tokens+el*l.rate)
	}
	b.last = now
}

// sweep drops the buckets that have refilled to the burst.
func (l *Limiter) sweep(now time.Time) {
	l.lastSweep = now
	for addr, b := range l.buckets {
		if b.refill(now, l); b.tokens >= l.burst {
			delete(l.buckets, addr)
		}
	}
}
