package raftfsm

import (
	"fmt"
	"log/slog"

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

// storeFailure is the state machine's stop; err and onFailure are FSM
// goroutine only (set before raft runs, for onFailure), failed is closed
// once err is set.
type storeFailure struct {
	err       error
	failed    chan struct{}
	onFailure func(error)
}

// OnFailure sets fn to be called, once, on the FSM goroutine, when a
// write of the state store fails. Set it before raft starts.
func (f *FSM) OnFailure(fn func(error)) { f.stop.onFailure = fn }

// Failed is closed when a write of the state store has failed: the state
// machine applies nothing more and the node should stop (Failure says
// why).
func (f *FSM) Failed() <-chan struct{} { return f.stop.failed }

// Failure is the failed write that closed Failed, nil before.
func (f *FSM) Failure() error {
	select {
	case <-f.stop.failed:
		return f.stop.err
	default:
		return nil
	}
}

// storeFailed stops the state machine at its first failed write: logged
// once, Failed closed, OnFailure's function called.
func (f *FSM) storeFailed(err error) {
	if f.stop.err != nil {
		return
	}
	f.stop.err = err
	f.log.Error("raftfsm: the metadata state cannot be written; the node stops", slog.Any("err", err))
	close(f.stop.failed)
	if f.stop.onFailure != nil {
		f.stop.onFailure(err)
	}
}

// refuse answers every command of logs not yet applied with the failure.
func (f *FSM) refuse(logs []*raft.Log, applied uint64, out []any) []any {
	for i, l := range logs {
		if l.Type == raft.LogCommand && l.Index > applied {
			out[i] = fmt.Errorf("raftfsm: stopped: %w", f.stop.err)
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
	dir := f.db.Opts().Dir
	if free, ok, err := diskFree(dir); err == nil && ok && free < memTableSize {
		f.log.Warn("raftfsm: the state store is left unclosed: its close would write its memtable to a disk without room for it",
			"dir", dir, "free", free, "needs", memTableSize)
		return nil
	}
	return f.db.Close()
}
