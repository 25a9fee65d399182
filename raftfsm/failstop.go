package raftfsm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// A write of the state store (badger) that fails stops the state machine
// for good, as a failed write of the raft log stops the node (package
// quorum's failstop.go): the process exits and a supervisor restarts it,
// replaying the log from the state's applied index. Carrying on is not
// possible: raft counts every batch ApplyBatch returns as applied, so
// applying the next one would skip the failed commands for good, and a
// snapshot taken then would claim them. So the failed batch's commands
// are answered with the failure (never acknowledged), every later command
// too, unapplied, and Snapshot and Restore refuse. A panic (what a failed
// commit did before) stopped it too, but as a crash: a goroutine dump,
// exit 2, nothing closed.

// storeFailure is the state machine's stop. A failure comes from the FSM
// goroutine (a failed commit) or from badger's own (a background flush
// that fails: flushwatch.go, possibly while NewFSM still runs, before
// OnFailure is set), so err and onFailure are guarded by mu, and
// whichever of storeFailed and OnFailure comes second calls onFailure:
// once either way. err is set before failed is closed and read after it
// without mu (failure).
type storeFailure struct {
	mu        sync.Mutex
	err       error       // guarded by mu until failed is closed
	onFailure func(error) // guarded by mu
	failed    chan struct{}
}

// failure is the error that stopped the state machine, nil before.
func (s *storeFailure) failure() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// OnFailure sets fn to be called, once, when a write of the state store
// fails: on the FSM goroutine, or on badger's for a failed background
// flush; at once when one already failed. Set it before raft starts.
func (f *FSM) OnFailure(fn func(error)) {
	f.stop.mu.Lock()
	f.stop.onFailure = fn
	err := f.stop.err
	f.stop.mu.Unlock()
	if err != nil {
		fn(err)
	}
}

// Failed is closed when a write of the state store has failed: the state
// machine applies nothing more and the node should stop (Failure says
// why).
func (f *FSM) Failed() <-chan struct{} { return f.stop.failed }

// Failure is the failed write that closed Failed, nil before.
func (f *FSM) Failure() error { return f.stop.failure() }

// storeFailed stops the state machine at its first failed write: logged
// once, OnFailure's function called, Failed closed. Safe for concurrent
// use.
func (f *FSM) storeFailed(err error) {
	f.stop.mu.Lock()
	if f.stop.err != nil {
		f.stop.mu.Unlock()
		return
	}
	f.stop.err = err
	fn := f.stop.onFailure
	f.stop.mu.Unlock()
	f.log.Error("raftfsm: the metadata state cannot be written; the node stops", slog.Any("err", err))
	if fn != nil {
		fn(err)
	}
	close(f.stop.failed) // after fn: whoever sees Failed sees its effects
}

// refuse answers every command of logs not yet applied with the failure.
func (f *FSM) refuse(logs []*raft.Log, applied uint64, out []any) []any {
	for i, l := range logs {
		if l.Type == raft.LogCommand && l.Index > applied {
			out[i] = fmt.Errorf("raftfsm: stopped: %w", f.stop.failure())
		}
	}
	return out
}

// closeAfterFailure closes the state store after it failed, unless its
// filesystem lacks the room badger's close writes into (its memtable, out
// as a table through a memory-mapped file: on a full disk, SIGBUS). Then
// the store is left open for the exiting process to drop, as a crash
// would: nothing is lost that the log does not hold (the state is written
// without fsync and replayed from the log on start; the memtable's log
// pages are the kernel's to write back).
func (f *FSM) closeAfterFailure() error {
	if errors.Is(f.stop.failure(), ErrStateFlushFailed) {
		// badger's close waits for its flushes, and the failed one is
		// retried for ever.
		f.log.Warn("raftfsm: the state store is left unclosed: its close would wait for the flush that failed")
		return nil
	}
	dir := f.db.Opts().Dir
	if free, ok, err := diskFree(dir); err == nil && ok && free < memTableSize {
		f.log.Warn("raftfsm: the state store is left unclosed: its close would write its memtable to a disk without room for it",
			"dir", dir, "free", free, "needs", memTableSize)
		return nil
	}
	return f.db.Close()
}
