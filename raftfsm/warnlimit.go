package raftfsm

import (
	"log/slog"
	"sync"
	"time"
)

const (
	// handshakeTimeout bounds an inter-node TLS handshake on either side.
	handshakeTimeout = 5 * time.Second
	// authWarnEvery rate-limits the WARN lines for rejected connections.
	authWarnEvery = 10 * time.Second
)

// warnLimiter logs at most one WARN line per period; the lines it holds
// back are counted in the next one. Safe for concurrent use.
type warnLimiter struct {
	log    *slog.Logger
	period time.Duration

	mu         sync.Mutex // guards last and suppressed
	last       time.Time
	suppressed int
}

func (w *warnLimiter) warn(msg string, args ...any) {
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
