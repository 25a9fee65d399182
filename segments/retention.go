package segments

import (
	"time"
)

// Maintain runs the time-driven work: time-based roll, flush.ms, retention
// and compaction. The owner calls it periodically; calls are serialized.
// Compaction reads and rewrites segments without holding the log's lock,
// so appends and reads go on meanwhile.
func (l *Log) Maintain(now time.Time) error {
	l.maintainMu.Lock()
	defer l.maintainMu.Unlock()
	if err := l.maintainLocked(now); err != nil {
		return err
	}
	if l.cfgSnapshot().compact() {
		if err := l.compact(now.UnixMilli()); err != nil {
			return err
		}
	}
	l.syncMu.Lock() // a roll's flush writes the state file holding it
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.err != nil {
		return l.usableLocked()
	}
	if l.recoveryPoint != l.savedRP && !l.cleanOnDisk && now.Sub(l.savedAt) >= checkpointInterval {
		return l.saveStateLocked(false)
	}
	return nil
}

// maintainLocked does Maintain's work but compaction, under Log.mu.
func (l *Log) maintainLocked(now time.Time) error {
	l.lockQuiet() // retention removes sealed segments; flush.ms flushes
	defer l.unlockQuiet()
	if err := l.usableLocked(); err != nil {
		return err
	}
	nowMs := now.UnixMilli()
	if s := l.active(); s.size > 0 {
		if err := l.loadLocked(s); err != nil {
			return l.failLocked(err)
		}
		if s.rollTs >= 0 && nowMs-s.rollTs >= l.cfg.SegmentMs {
			if err := l.rollLocked(l.end); err != nil {
				return err
			}
		}
	}
	if l.unflushed > 0 && now.Sub(l.oldestUnsync).Milliseconds() >= l.cfg.FlushMs {
		if err := l.flushLocked(); err != nil {
			return err
		}
	}
	if l.cfg.deleteOld() {
		return l.retainLocked(now)
	}
	return nil
}

// checkpointInterval spaces Maintain's recovery-point checkpoints (Kafka's
// log.flush.offset.checkpoint.interval.ms); the point only bounds how much
// an unclean open rescans.
const checkpointInterval = time.Minute

// retainLocked deletes the oldest sealed segments that are past
// retention.ms (by their largest timestamp, or their file time when no
// batch carries one) or that retention.bytes does not leave room for.
func (l *Log) retainLocked(now time.Time) error {
	n := 0
	excess := int64(-1)
	if l.cfg.RetentionBytes >= 0 {
		var total int64
		for _, s := range l.segs {
			total += s.size
		}
		excess = total - l.cfg.RetentionBytes
	}
	for ; n < len(l.segs)-1; n++ {
		s := l.segs[n]
		if excess >= s.size {
			excess -= s.size
			continue
		}
		expired, err := l.expiredLocked(s, now)
		if err != nil {
			return err
		}
		if !expired {
			break
		}
	}
	if n == 0 {
		return l.trimEpochsLocked()
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	l.logger.Debug("segments: retention deletes segments", "count", n)
	if err := l.dropOldestLocked(n); err != nil {
		return err
	}
	return l.trimEpochsLocked()
}

func (l *Log) expiredLocked(s *segment, now time.Time) (bool, error) {
	if l.cfg.RetentionMs < 0 {
		return false, nil
	}
	if err := l.loadLocked(s); err != nil {
		return false, err
	}
	ts := s.maxTs
	if ts < 0 {
		fi, err := l.fs.Stat(s.path(l.dir))
		if err != nil {
			return false, err
		}
		ts = fi.ModTime().UnixMilli()
	}
	return now.UnixMilli()-ts > l.cfg.RetentionMs, nil
}
