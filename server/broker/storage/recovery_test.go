package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/segments"
)

// fakeReplica is a partition whose log failed; Recover fails while
// failures are left (the disk still full), then succeeds.
type fakeReplica struct {
	topic    string
	idx      int32
	mu       sync.Mutex
	err      error // the log's sticky error
	failures int   // Recovers left to fail; <0: always
	closed   bool  // the log was deleted meanwhile
	attempts int
}

func (r *fakeReplica) Topic() string { return r.topic }
func (r *fakeReplica) Index() int32  { return r.idx }

func (r *fakeReplica) LogErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *fakeReplica) Recover() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	switch {
	case r.closed:
		return fmt.Errorf("recover: %w", segments.ErrClosed)
	case r.failures != 0:
		r.failures--
		return fmt.Errorf("probe write: %w", syscall.ENOSPC)
	}
	r.err = nil
	return nil
}

func (r *fakeReplica) tries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

func failing(topic string, idx int32, failures int) *fakeReplica {
	return &fakeReplica{topic: topic, idx: idx, err: fmt.Errorf("write: %w", syscall.ENOSPC), failures: failures}
}

func recoveryOf(rs ...*fakeReplica) *Recovery {
	return &Recovery{Health: &Health{}, Logger: slog.New(slog.DiscardHandler), Failed: func() []Replica {
		var out []Replica
		for _, r := range rs {
			if r.LogErr() != nil && !r.closed {
				out = append(out, r)
			}
		}
		return out
	}}
}

// A failed attempt backs off (doubling, up to MaxBackoff) and stops at the
// first replica still failing, since they share the disk; Health names
// the failed partitions until they recovered, then is healthy.
func TestRecoveryBacksOffAndReports(t *testing.T) {
	a, b := failing("t", 0, 0), failing("t", 1, 2)
	r := recoveryOf(a, b)
	every := time.Second
	l := loop{r: r, every: every, backoff: every}
	t0 := time.Unix(1000, 0)

	l.round(t0) // the first attempt starts at b (attempt 1 of 2): it fails, a is not tried
	if a.tries() != 0 || b.tries() != 1 {
		t.Fatalf("after the first round: a tried %d, b %d; want 0 and 1", a.tries(), b.tries())
	}
	err := r.Health.Err()
	if r.Health.Count() != 2 || !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "(t-0, t-1): no space left on device") {
		t.Fatalf("health after the first round: %d failed, %v", r.Health.Count(), err)
	}
	l.round(t0.Add(every)) // backing off 2 s: no attempt
	if a.tries() != 0 || b.tries() != 1 {
		t.Fatalf("attempted while backing off: a %d, b %d", a.tries(), b.tries())
	}
	l.round(t0.Add(2 * every)) // starts at a: recovered; b fails again
	if a.LogErr() != nil || b.tries() != 2 || r.Health.Count() != 1 {
		t.Fatalf("second attempt: a %v, b tried %d, %d failed", a.LogErr(), b.tries(), r.Health.Count())
	}
	if l.backoff != 4*every {
		t.Fatalf("backoff after two failed attempts %v, want %v", l.backoff, 4*every)
	}
	l.round(t0.Add(6 * every))
	if b.LogErr() != nil || r.Health.Count() != 0 || r.Health.Err() != nil || l.backoff != every {
		t.Fatalf("after recovery: b %v, %d failed, health %v, backoff %v", b.LogErr(), r.Health.Count(), r.Health.Err(), l.backoff)
	}
	for i := 0; i < 20; i++ {
		l.backoff = min(l.backoff*2, MaxBackoff)
	}
	if l.backoff != MaxBackoff {
		t.Fatalf("backoff grew to %v, past MaxBackoff", l.backoff)
	}
}

// A replica whose directory stays broken cannot keep the others from
// recovering: each attempt starts at another one. A log deleted meanwhile
// (ErrClosed) is skipped, not a failure.
func TestRecoveryRotatesPastABrokenReplica(t *testing.T) {
	broken := failing("t", 0, -1)
	gone := failing("t", 3, 0)
	gone.closed = true
	others := []*fakeReplica{failing("t", 1, 0), failing("t", 2, 0)}
	r := recoveryOf(append([]*fakeReplica{broken}, others...)...)
	l := loop{r: r, every: time.Second, backoff: time.Second}
	if !r.recoverAll([]Replica{gone, others[0]}, 0) || others[0].LogErr() != nil {
		t.Fatal("a closed log failed the attempt")
	}
	for i := 0; i < 3 && others[1].LogErr() != nil; i++ {
		l.round(l.next)
	}
	if others[1].LogErr() != nil || r.Health.Count() != 1 {
		t.Fatalf("after 3 attempts: t-2 %v, %d failed; want only t-0 failed", others[1].LogErr(), r.Health.Count())
	}
	if err := r.Health.Err(); !strings.Contains(err.Error(), "1 partition(s) refuse writes (t-0)") {
		t.Fatalf("health %v", err)
	}
}

// Health names five partitions and counts the rest; with none failed it
// reports the disk reserve's refusal, which each round measures.
func TestHealthNamesAFewAndTheReserve(t *testing.T) {
	var rs []*fakeReplica
	for i := range 7 {
		rs = append(rs, failing("t", int32(i), -1))
	}
	r := recoveryOf(rs...)
	d := &fakeDisk{free: 1, total: 1000}
	r.Guard = guardOn(d, 100)
	l := loop{r: r, every: time.Second, backoff: time.Second}
	l.round(time.Unix(1000, 0))
	if err := r.Health.Err(); !strings.Contains(err.Error(), "7 partition(s) refuse writes (t-0, t-1, t-2, t-3, t-4 and 2 more)") {
		t.Fatalf("health %v", err)
	}
	for _, x := range rs {
		x.mu.Lock()
		x.err = nil
		x.mu.Unlock()
	}
	l.round(time.Unix(1001, 0))
	if err := r.Health.Err(); err == nil || !strings.Contains(err.Error(), "--min-free-disk") {
		t.Fatalf("health with the disk below the reserve and no failed log: %v", err)
	}
}

// Run recovers on its own and returns once its context ends.
func TestRecoveryRunStopsWithContext(t *testing.T) {
	a := failing("t", 0, 1)
	r := recoveryOf(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, time.Millisecond) }()
	for a.LogErr() != nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if a.tries() != 2 {
		t.Fatalf("recovered after %d attempts, want 2", a.tries())
	}
}
