package segments

import (
	"time"
)

// Maintain runs the time-driven work: time-based roll, flush.ms, retention
// and compaction. The owner calls it periodically; calls are serialized.
// Its fsyncs (a roll's flush, flush.ms) and compaction's reads and rewrites
// run without the log's lock, so appends and reads go on meanwhile. A log
// with nothing due (maintainDueLocked) costs one hold of its lock: a
// broker maintains every log written in the last minute each round, and
// the full pass took the log's locks six times to find nothing to do
// (issue 19: 300,000 logs after their first writes).
func (l *Log) Maintain(now time.Time) error {
	l.mu.Lock()
	due := l.maintainDueLocked(now)
	l.mu.Unlock()
	if !due {
		return nil
	}
	return l.maintainAll(now)
}

// maintainDueLocked reports whether maintainAll may have anything to do
// at now: a failed or closed log (to return its error), a roll to flush
// or by segment.ms, an fsync by flush.ms, a sealed segment retention may
// delete, epochs to trim, a recovery-point checkpoint, compaction. When it
// says no, maintainAll would change nothing (TestMaintainDue).
func (l *Log) maintainDueLocked(now time.Time) bool {
	return !now.Before(l.nextMaintainLocked())
}

// NextMaintain is the earliest time at which Maintain may have something
// to do, as the log is now: the zero time when it may at once (a failed
// or closed log, a roll's flush in flight, compaction, a sealed segment
// retention may delete, epochs to trim), else the first of a segment.ms
// roll, a flush.ms fsync and the recovery point's checkpoint, or a time
// centuries away when none is pending. Until the log changes (an append,
// a roll, a truncation, DeleteRecords, SetConfig, a recovery), Maintain
// before then changes nothing: an owner of many logs keeps them in order
// of it instead of asking each one every round (issue 19).
func (l *Log) NextMaintain() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextMaintainLocked()
}

// maintainNever is NextMaintain's answer when nothing is pending.
var maintainNever = time.Unix(1<<40, 0)

// nextMaintainLocked is NextMaintain; maintainDueLocked's one definition.
func (l *Log) nextMaintainLocked() time.Time {
	if l.closed || l.err != nil || len(l.unsealed) > 0 || l.cfg.compact() {
		return time.Time{}
	}
	if l.cfg.deleteOld() && len(l.segs) > 1 || l.epochsToTrimLocked() {
		return time.Time{}
	}
	next := maintainNever
	if s := l.active(); s.size > 0 {
		if !s.loaded {
			return time.Time{}
		}
		if s.rollTs >= 0 && l.cfg.SegmentMs <= maintainNever.UnixMilli()-s.rollTs {
			next = minTime(next, time.UnixMilli(s.rollTs+l.cfg.SegmentMs))
		}
	}
	if l.unflushed > 0 && l.cfg.FlushMs <= int64(maxDuration/time.Millisecond) {
		next = minTime(next, l.oldestUnsync.Add(time.Duration(l.cfg.FlushMs)*time.Millisecond))
	}
	if l.recoveryPoint != l.savedRP && !l.cleanOnDisk {
		next = minTime(next, l.savedAt.Add(checkpointInterval))
	}
	return next
}

const maxDuration = time.Duration(1<<63 - 1)

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// maintainAll is Maintain's full pass.
func (l *Log) maintainAll(now time.Time) error {
	l.maintainMu.Lock()
	defer l.maintainMu.Unlock()
	flushTo, err := l.rollForTime(now)
	if err != nil {
		return err
	}
	if flushTo > 0 {
		// flush.ms: the fsync runs as an append's would, without mu.
		if err := l.syncTo(flushTo); err != nil {
			return err
		}
	}
	if err := l.retain(now); err != nil {
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
	if l.recoveryPoint != l.savedRP && !l.cleanOnDisk && now.Sub(l.savedAt) >= checkpointInterval && !l.smallRescanLocked() {
		return l.saveStateLocked(false)
	}
	return nil
}

// rollForTime rolls the active segment when segment.ms says so, and
// returns the end offset when flush.ms asks for an fsync up to it (0:
// none). It holds mu only, as an append that rolls does: the roll's flush
// is sealLoop's (or retain's), without mu.
func (l *Log) rollForTime(now time.Time) (flushTo int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	nowMs := now.UnixMilli()
	if s := l.active(); s.size > 0 {
		if err := l.loadLocked(s); err != nil {
			return 0, l.failLocked(err)
		}
		if s.rollTs >= 0 && nowMs-s.rollTs >= l.cfg.SegmentMs {
			if err := l.rollLocked(l.end); err != nil {
				return 0, err
			}
		}
	}
	if l.unflushed > 0 && now.Sub(l.oldestUnsync).Milliseconds() >= l.cfg.FlushMs {
		return l.end, nil
	}
	return 0, nil
}

// retain applies retention. It first flushes, without mu, the rolls
// pending when it starts (the segment a segment.ms roll just sealed among
// them: retention may delete that very segment, and a flush left pending
// would then fail the log over a file it removed). A roll queued meanwhile
// stays sealLoop's: retainLocked leaves its segment alone, and it is not
// flushed under mu (lockQuiet would: with a slow disk and appends rolling
// every second, each pass held the partition's appends for a flush).
func (l *Log) retain(now time.Time) error {
	l.syncMu.Lock()
	_ = l.flushSeals() // a failure is sticky: usableLocked sees it
	l.mu.Lock()
	defer l.unlockQuiet()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if l.cfg.deleteOld() {
		return l.retainLocked(now)
	}
	return nil
}

// checkpointInterval spaces Maintain's recovery-point checkpoints (Kafka's
// log.flush.offset.checkpoint.interval.ms); the point only bounds how much
// an unclean open rescans, so a log whose rescan would stay within
// Config.RescanBytes gets none (issue 19: every one of the 100,000 logs a
// broker recovered after a kill -9 wrote its state file, two fsyncs, at the
// first maintenance round, one after the other on the broker's run
// goroutine, which reconciles no metadata meanwhile).
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
	last := len(l.segs) - 1 // the active segment stays
	if len(l.unsealed) > 0 {
		// Neither a segment whose roll is not flushed yet nor the one
		// before it (it would become the oldest, its transaction index
		// rewritten while the flush writes its own) goes.
		last = max(l.segmentForLocked(l.unsealed[0].s.base)-1, 0)
	}
	for ; n < last; n++ {
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
		l.trimEpochsLocked()
		return nil
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	l.logger().Debug("segments: retention deletes segments", "count", n)
	if err := l.dropOldestLocked(n); err != nil {
		return err
	}
	l.trimEpochsLocked()
	return nil
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
