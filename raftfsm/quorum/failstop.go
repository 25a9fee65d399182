package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// A write to the raft log or stable store that fails is fatal for the node
// (fail-stop, as Kafka halts a controller or broker whose metadata log
// cannot be written): the node reports it on Failed and the process
// exits, so a supervisor restarts it and the others carry on without it.
// Retrying is no use: raft-wal refuses every append after a failed segment
// rotation ("segment is sealed"), and raft would go on proposing and
// refusing with its metadata frozen. Failed reads stay errors of the call.
// A failed write of the state store (raftfsm's failstop.go) stops the node
// the same way (stateFailed).

// writeFailure records the first failed write of a raftLog.
type writeFailure struct {
	log    *slog.Logger
	once   *sync.Once
	failed chan struct{} // closed at the first failed write
	err    *error        // that write's error, set before failed closes
}

func newWriteFailure(log *slog.Logger) writeFailure {
	return writeFailure{log: log, once: new(sync.Once), failed: make(chan struct{}), err: new(error)}
}

// check passes err through, reporting it first when it is a write failure:
// logged once at error level, then failed is closed. A write to a log
// already closed (the node closing) is not one.
func (f writeFailure) check(doing string, err error) error {
	if err == nil || errors.Is(err, wal.ErrClosed) {
		return err
	}
	f.once.Do(func() {
		*f.err = fmt.Errorf("raftfsm: %s: %w", doing, err)
		if errors.Is(err, waltypes.ErrSealed) {
			// The cause is in raft-wal's "rotate error" line, logged by
			// its background rotation before this append.
			*f.err = fmt.Errorf("%w (the next segment could not be created: see the raft log's rotate error)", *f.err)
		}
		f.log.Error("raftfsm: the metadata log cannot be written; the node stops", "err", *f.err)
		close(f.failed)
	})
	return err
}

// stateFailed reports a failed write of the state store (raftfsm's
// FSM.OnFailure; the FSM logged it): the node stops as for its log.
func (f writeFailure) stateFailed(err error) {
	f.once.Do(func() {
		*f.err = err
		close(f.failed)
	})
}

// StoreLog appends one entry (raft-wal's StoreLog would call its own
// StoreLogs, not ours).
func (l *raftLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs appends entries; a failure is fatal.
func (l *raftLog) StoreLogs(logs []*raft.Log) error {
	return l.writes.check("append to the raft log", l.WAL.StoreLogs(logs))
}

// DeleteRange deletes entries; a failure is fatal.
func (l *raftLog) DeleteRange(lo, hi uint64) error {
	return l.writes.check("delete from the raft log", l.WAL.DeleteRange(lo, hi))
}

// Set writes a stable key; a failure is fatal.
func (l *raftLog) Set(k, v []byte) error {
	if stableWriteHook != nil {
		stableWriteHook(k)
	}
	return l.writes.check("write the raft stable store", l.WAL.Set(k, v))
}

// stableWriteHook, when set (by this package's tests only, before a node
// opens), is called before each write of a stable key: a slow disk.
var stableWriteHook func(key []byte)

// SetUint64 writes a stable key; a failure is fatal.
func (l *raftLog) SetUint64(k []byte, v uint64) error {
	if stableWriteHook != nil {
		stableWriteHook(k)
	}
	return l.writes.check("write the raft stable store", l.WAL.SetUint64(k, v))
}

// Failed is closed when a write to this node's raft log, stable store or
// state store has failed: the node cannot take part in the quorum any more and its process
// should stop (Failure says why). It stays open while writes succeed.
func (n *Node) Failed() <-chan struct{} { return n.logs.writes.failed }

// Failure is the write that closed Failed, nil before.
func (n *Node) Failure() error {
	select {
	case <-n.logs.writes.failed:
		return *n.logs.writes.err
	default:
		return nil
	}
}
