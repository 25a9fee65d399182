package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/runnel/runnel/segments"
)

// MaxBackoff bounds the wait between two recovery attempts while a disk
// stays full.
const MaxBackoff = 30 * time.Second

// Replica is a hosted partition whose log failed, as the recovery loop
// sees it.
type Replica interface {
	Topic() string
	Index() int32
	// LogErr is the log's sticky error (nil once it recovered).
	LogErr() error
	// Recover recovers the log in place (segments.Log.Recover probes the
	// disk first) and, once it did, brings the partition's state in line
	// with it; segments.ErrClosed when the log was deleted or moved
	// meanwhile.
	Recover() error
}

// Recovery watches the logs for a sticky storage error and recovers them
// in place once the disk takes writes again, backing off while it does
// not, and publishes what it saw to Health.
type Recovery struct {
	Guard  *Guard  // measured every round (nil: no reserve)
	Health *Health // receives each round's findings
	Logger *slog.Logger
	// Failed lists the replicas whose log has failed.
	Failed func() []Replica
}

// Run checks the logs every interval until ctx ends; it returns then.
func (r *Recovery) Run(ctx context.Context, every time.Duration) {
	l := loop{r: r, every: every, backoff: every}
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.round(time.Now())
		t.Reset(every)
	}
}

// loop is Run's state between rounds.
type loop struct {
	r       *Recovery
	every   time.Duration
	backoff time.Duration // the wait after a failed attempt
	next    time.Time     // no attempt before
	rounds  int           // attempts made
}

// round is one check: measure the reserve, try to recover the failed
// logs unless backing off, publish.
func (l *loop) round(now time.Time) {
	l.r.Guard.Measure(true)
	failed := l.r.Failed()
	if len(failed) > 0 && !now.Before(l.next) {
		l.rounds++
		if l.r.recoverAll(failed, l.rounds) {
			l.backoff = l.every
		} else {
			l.backoff = min(l.backoff*2, MaxBackoff)
			l.next = now.Add(l.backoff)
		}
		failed = l.r.Failed()
	}
	l.r.publish(failed)
}

// recoverAll tries to recover every failed log; it stops at the first
// failure (they share the disk) and reports whether all recovered. Each
// attempt starts at another replica, so one whose directory stays broken
// cannot keep the others from recovering.
func (r *Recovery) recoverAll(failed []Replica, attempt int) bool {
	start := attempt % len(failed)
	for _, p := range append(failed[start:len(failed):len(failed)], failed[:start]...) {
		if err := p.Recover(); err != nil {
			if errors.Is(err, segments.ErrClosed) {
				continue // deleted or moved meanwhile
			}
			r.Logger.Warn("partition storage still failing; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
			return false
		}
		r.Logger.Info("partition storage recovered; writes accepted again", "topic", p.Topic(), "partition", p.Index())
	}
	return true
}

func (r *Recovery) publish(failed []Replica) {
	r.Health.setDisk(r.Guard.Err())
	if len(failed) == 0 {
		r.Health.set(nil, "")
		return
	}
	names := make([]string, len(failed))
	for i, p := range failed {
		names[i] = fmt.Sprintf("%s-%d", p.Topic(), p.Index())
	}
	sort.Strings(names)
	r.Health.set(names, Reason(failed[0].LogErr()))
}
