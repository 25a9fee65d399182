package segments

import (
	"path/filepath"
	"slices"
)

// The leader epochs live in memory and in the state file, written with the
// recovery point whenever it is (roll flush, clean close, truncation,
// delete-records, a log's first write), never on the append path: a new
// epoch's first append writes and fsyncs nothing more than any append.
//
// The invariant: a state file on disk holds exactly the epoch entries that
// start below its recovery point. Every writer takes the entries known when
// it takes the recovery point, and an entry is known before its batch is
// written; Truncate saves a recovery point no higher than the end its cut
// leaves, with the entries below it. The entries at or past it are missing
// or stale: recovery drops them and takes them again from the batches it
// replays that end at or past the recovery point (each carries its
// partitionLeaderEpoch), as Kafka rebuilds its leader-epoch cache. (A
// batch holding the recovery point adds an entry only when no state file
// had its epoch: a Reset cut short by a crash leaves the old segments with
// the new, empty state file.) Those
// batches are as appended: compaction rewrites no segment at or past the
// saved recovery point (startCompactionLocked saves it first), so an
// epoch's first batch is never one compaction dropped.

// assignEpochLocked records that epoch starts at start when it is newer than
// the latest known epoch (an older one is ignored, as Kafka does). It
// writes nothing: see above.
func (l *Log) assignEpochLocked(epoch int32, start int64) {
	if epoch < 0 {
		return
	}
	if n := len(l.epochs); n > 0 && epoch <= l.epochs[n-1].Epoch {
		return
	}
	l.epochs = append(l.epochs, epochEntry{Epoch: epoch, Start: start})
}

// keepEpochsBeforeLocked drops the entries starting at or after off.
func (l *Log) keepEpochsBeforeLocked(off int64) {
	i := 0
	for i < len(l.epochs) && l.epochs[i].Start < off {
		i++
	}
	l.epochs = l.epochs[:i]
}

// epochsToTrimLocked reports whether trimEpochsLocked would change the
// epochs: Maintain asks it before its full pass (maintainDueLocked).
func (l *Log) epochsToTrimLocked() bool {
	es := l.epochs
	return len(es) > 1 && es[1].Start <= l.start ||
		len(es) > 0 && (es[0].Start < l.start || es[len(es)-1].Start >= l.end)
}

// trimEpochsLocked drops epochs starting at or past the end offset and moves
// epochs that started before the log start offset up to it. It changes the
// entries in memory only (state files hold copies: stateLocked), and the
// next state file holds them. One on disk with entries past the end or
// below the start gives no wrong answer: Open trims them the same way.
func (l *Log) trimEpochsLocked() {
	es := l.epochs
	// Keep the last epoch that starts at or before the log start offset.
	for len(es) > 1 && es[1].Start <= l.start {
		es = es[1:]
	}
	if len(es) > 0 && es[0].Start < l.start {
		es[0].Start = l.start
	}
	for len(es) > 0 && es[len(es)-1].Start >= l.end {
		es = es[:len(es)-1]
	}
	l.epochs = es
}

// stateLocked is the state file content for recovery point rp (not clean):
// it holds a copy of the epochs known now, as the invariant above needs.
func (l *Log) stateLocked(rp int64) logState {
	return logState{RecoveryPoint: rp, StartOffset: l.start, HasEpochs: true, Epochs: slices.Clone(l.epochs)}
}

// writeState replaces the state file durably with st, then removes the
// leader-epoch-checkpoint file a previous release kept, once: the epochs
// are in the state file now. The removal is not made durable: a crash can
// bring the old file back, and Open ignores it beside a state file of
// version 2 or later and removes it again after the next write. It touches no field
// guarded by mu.
func (l *Log) writeState(st logState) error {
	if err := writeFileAtomic(l.fs, l.dir, stateFile, st.Encode()); err != nil {
		return err
	}
	if l.legacyEpochs.Load() {
		if err := removeIfExists(l.fs, filepath.Join(l.dir, epochsFile)); err != nil {
			l.logger().Warn("segments: cannot remove the old leader-epoch checkpoint; ignored from now on", "err", err)
			return nil
		}
		l.legacyEpochs.Store(false)
	}
	return nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= epoch
// and the offset where it ended (the start of the next epoch, or the log end
// offset for the latest epoch). With no such epoch it returns (-1, -1), and
// for an epoch below the first known one (epoch, first epoch's start), as
// Kafka does.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return -1, -1, ErrClosed
	}
	es := l.epochs
	if epoch < 0 || len(es) == 0 {
		return -1, -1, nil
	}
	if last := es[len(es)-1]; epoch == last.Epoch {
		return epoch, l.end, nil
	}
	higher := -1
	for i, e := range es {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	switch {
	case higher < 0:
		return -1, -1, nil
	case higher == 0:
		return epoch, es[0].Start, nil
	default:
		return es[higher-1].Epoch, es[higher].Start, nil
	}
}

// LeaderEpoch returns the latest leader epoch appended, -1 when none.
func (l *Log) LeaderEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1].Epoch
}
