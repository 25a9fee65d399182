package segments

import "fmt"

// assignEpochLocked records that epoch starts at start when it is newer than
// the latest known epoch (an older one is ignored, as Kafka does).
func (l *Log) assignEpochLocked(epoch int32, start int64) error {
	if epoch < 0 {
		return nil
	}
	if n := len(l.epochs); n > 0 && epoch <= l.epochs[n-1].epoch {
		return nil
	}
	l.epochs = append(l.epochs, epochEntry{epoch: epoch, start: start})
	return l.saveEpochsLocked()
}

func (l *Log) saveEpochsLocked() error {
	if err := writeFileAtomic(l.fs, l.dir, epochsFile, encodeEpochs(l.epochs)); err != nil {
		return l.failLocked(fmt.Errorf("segments: write %s: %w", epochsFile, err))
	}
	return nil
}

// trimEpochsLocked drops epochs starting at or past the end offset and moves
// epochs that started before the log start offset up to it.
func (l *Log) trimEpochsLocked() error {
	es, changed := l.epochs, false
	// Keep the last epoch that starts at or before the log start offset.
	for len(es) > 1 && es[1].start <= l.start {
		es, changed = es[1:], true
	}
	if len(es) > 0 && es[0].start < l.start {
		es[0].start, changed = l.start, true
	}
	for len(es) > 0 && es[len(es)-1].start >= l.end {
		es, changed = es[:len(es)-1], true
	}
	l.epochs = es
	if !changed {
		return nil
	}
	return l.saveEpochsLocked()
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
	if last := es[len(es)-1]; epoch == last.epoch {
		return epoch, l.end, nil
	}
	higher := -1
	for i, e := range es {
		if e.epoch > epoch {
			higher = i
			break
		}
	}
	switch {
	case higher < 0:
		return -1, -1, nil
	case higher == 0:
		return epoch, es[0].start, nil
	default:
		return es[higher-1].epoch, es[higher].start, nil
	}
}

// LeaderEpoch returns the latest leader epoch appended, -1 when none.
func (l *Log) LeaderEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1].epoch
}
