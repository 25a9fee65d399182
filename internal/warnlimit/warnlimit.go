// Package warnlimit rate-limits WARN lines about things a peer or client
// may repeat in a loop (refused connections, failed logins): at most one
// line per period, the lines held back counted in the next one. The Kafka
// door (kafkaproto), the inter-node port (internode) and the server share
// it; it imports no other project package, so the doors stay free of the
// rest of runnel (deps_test.go).
package warnlimit

import (
	"log/slog"
	"sync"
	"time"
)

// Limiter logs at most one WARN line per period; the lines it holds back
// are counted in the next one ("suppressed_since_last"), so a peer
// retrying in a loop costs one line per period, not one per attempt. Safe
// for concurrent use.
type Limiter struct {
	log    *slog.Logger
	period time.Duration

	mu         sync.Mutex // guards last and suppressed
	last       time.Time
	suppressed int
}

// New logs through log at most once per period.
func New(log *slog.Logger, period time.Duration) *Limiter {
	return &Limiter{log: log, period: period}
}

// Warn logs msg at WARN unless a line was logged less than a period ago.
func (w *Limiter) Warn(msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < w.period {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	w.log.Warn(msg, args...)
}
