package internode

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

// WarnLimiter logs at most one WARN line per period; the lines it holds
// back are counted in the next one, so a peer retrying in a loop costs one
// line per period, not one per attempt. Safe for concurrent use. The mux
// uses one for refused connections; the server uses one for inter-broker
// connections on this port whose hello it refuses.
type WarnLimiter struct {
	log    *slog.Logger
	period time.Duration

	mu         sync.Mutex // guards last and suppressed
	last       time.Time
	suppressed int
}

// NewWarnLimiter logs through log at most once per period.
func NewWarnLimiter(log *slog.Logger, period time.Duration) *WarnLimiter {
	return &WarnLimiter{log: log, period: period}
}

// Warn logs msg at WARN unless a line was logged less than a period ago.
func (w *WarnLimiter) Warn(msg string, args ...any) {
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
