// Fsyncs of the active segment (Sync, the flush policy's waits) and the
// state file's saves.

package segments

import (
	"fmt"
)

// syncSegmentLocked fsyncs s; a failure is sticky.
func (l *Log) syncSegmentLocked(s *segment) error {
	if err := l.syncNewDirLocked(); err != nil {
		return err
	}
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: open %s: %w", s.path(l.dir), err))
	}
	defer l.files.release(cf)
	if err := cf.f.Sync(); err != nil {
		return l.failLocked(fmt.Errorf("segments: fsync %s: %w", s.path(l.dir), err))
	}
	return nil
}

// flushLocked fsyncs the pending rolls and the active segment and advances
// the recovery point. The caller holds syncMu.
func (l *Log) flushLocked() error {
	if err := l.flushSealsLocked(); err != nil {
		return err
	}
	if l.unflushed == 0 && l.recoveryPoint == l.end {
		return nil
	}
	if err := l.syncSegmentLocked(l.active()); err != nil {
		return err
	}
	l.recoveryPoint = l.end
	l.unflushed = 0
	return nil
}

// Sync fsyncs everything appended so far.
func (l *Log) Sync() error {
	l.mu.Lock()
	end := l.end
	l.mu.Unlock()
	return l.syncTo(end)
}

// syncTo returns once everything below target is fsynced: by an fsync of the
// active segment done here without holding mu, or by one that another
// caller finished meanwhile. A failure is sticky, so no append is
// acknowledged after a failed fsync.
func (l *Log) syncTo(target int64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for {
		// Segments sealed by rolls first: the recovery point moves past
		// none of them before it is flushed.
		if err := l.flushSeals(); err != nil {
			return err
		}
		l.mu.Lock()
		if len(l.unsealed) > 0 {
			l.mu.Unlock() // a roll came in between
			continue
		}
		if err := l.usableLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
		if l.recoveryPoint >= target {
			l.mu.Unlock()
			return nil
		}
		if !l.dirUnsynced {
			break // with mu held
		}
		l.mu.Unlock()
		// The log's first fsync: its directory and state file first.
		if err := l.syncNewDir(); err != nil {
			return err
		}
	}
	s, end, gen, pending := l.active(), l.end, l.truncGen, l.unflushed
	path := s.path(l.dir)
	cf, err := l.files.acquire(l.fs, path)
	l.mu.Unlock()
	if err == nil {
		err = cf.f.Sync()
		l.files.release(cf)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: fsync %s: %w", path, err))
	}
	if gen == l.truncGen {
		// Unchanged since the snapshot but for appends past end: a roll
		// meanwhile sealed the segment just fsynced, whose bytes below end
		// are durable, as is its directory entry (it was active already).
		l.recoveryPoint = max(l.recoveryPoint, end)
		l.unflushed = max(l.unflushed-pending, 0)
	}
	return nil
}

// saveStateLocked writes the state file; clean records a clean shutdown.
func (l *Log) saveStateLocked(clean bool) error {
	st := l.stateLocked(l.recoveryPoint)
	if clean {
		s := l.active()
		st.Clean, st.End, st.ActiveBase, st.ActiveSize = true, l.end, s.base, s.size
	}
	if err := l.writeState(st); err != nil {
		return l.failLocked(fmt.Errorf("segments: write %s: %w", stateFile, err))
	}
	l.savedRP, l.savedAt = l.recoveryPoint, l.now()
	l.cleanOnDisk = clean
	return nil
}

// markDirtyLocked clears the clean-shutdown mark before the first change.
func (l *Log) markDirtyLocked() error {
	if !l.cleanOnDisk {
		return nil
	}
	return l.saveStateLocked(false)
}
