package raftfsm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// badger flushes a full memtable to a table on a goroutine of its own and,
// when that fails, logs it and retries every second for ever; writes go on
// until the next memtable is full too, then block for good, and its Close
// waits for the flush. Nothing returns the error: the one sign is the log
// line. So the logger OpenBadger gives badger watches for it
// (flushFailurePrefix) and the FSM stops at the first one (fail-stop, as
// for a failed commit: failstop.go) instead of hanging later with its
// metadata frozen.

// flushFailurePrefix begins the line badger logs at error level for a
// failed memtable flush (badger v4's db.go, flushMemtable).
const flushFailurePrefix = "error flushing memtable to disk"

// ErrStateFlushFailed: badger could not flush a memtable to a table.
var ErrStateFlushFailed = errors.New("raftfsm: the state store cannot flush its memtable to disk")

// flushWatch passes a failed flush seen by the logger to the FSM, once it
// is watching; a failure seen before is kept for it.
type flushWatch struct {
	mu   sync.Mutex
	fn   func(error) // guarded by mu
	seen error       // guarded by mu
}

// failed reports a failed flush (badger's flush goroutine).
func (w *flushWatch) failed(line string) {
	err := fmt.Errorf("%w: %s", ErrStateFlushFailed, line)
	w.mu.Lock()
	fn := w.fn
	if fn == nil && w.seen == nil {
		w.seen = err
	}
	w.mu.Unlock()
	if fn != nil {
		fn(err)
	}
}

// watch sends failed flushes to fn from now on, and one seen before.
func (w *flushWatch) watch(fn func(error)) {
	w.mu.Lock()
	w.fn = fn
	seen := w.seen
	w.mu.Unlock()
	if seen != nil {
		fn(seen)
	}
}

// watchFlushes has the FSM stop at a failed flush of db, when db was
// opened by OpenBadger.
func (f *FSM) watchFlushes() {
	if l, ok := f.db.Opts().Logger.(badgerLogger); ok && l.flushes != nil {
		l.flushes.watch(f.storeFailed)
	}
}

// isFlushFailure tells badger's failed-flush line.
func isFlushFailure(line string) bool { return strings.HasPrefix(line, flushFailurePrefix) }
