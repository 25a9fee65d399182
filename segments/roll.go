// The active segment's roll and the flush of sealed segments: rollLocked
// seals without fsync, sealLoop makes each sealed segment durable without
// the log's lock, lockQuiet waits for those flushes.

package segments

import (
	"fmt"
	"strings"
)

func (l *Log) shouldRollLocked(s *segment, n, last, nowMs int64) bool {
	if !fitsRelative(s.base, last) {
		return true // index entries hold offsets relative to the base in 32 bits
	}
	if s.size == 0 {
		return false
	}
	return s.size+n > l.cfg.SegmentBytes || (s.rollTs >= 0 && nowMs-s.rollTs >= l.cfg.SegmentMs)
}

// rollLocked seals the active segment and starts a new one at base. It
// does no fsync: the sealed segment, its index files and the new segment's
// directory entry are made durable by sealLoop without mu (a slow disk must
// not stall the appends and reads of the partition), and only then does the
// recovery point move to base, as Kafka flushes a rolled segment in the
// background.
func (l *Log) rollLocked(base int64) error {
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	if err := l.txnReadyLocked(); err != nil {
		return l.failLocked(err)
	}
	s := l.active()
	if err := l.loadLocked(s); err != nil {
		return l.failLocked(err)
	}
	ns := &segment{base: base, loaded: true, next: base, maxTs: -1, rollTs: -1}
	cf, err := l.files.create(l.fs, ns.path(l.dir))
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: create segment: %w", err))
	}
	l.files.release(cf)
	p := &pendingSeal{s: s, upTo: base, files: l.indexFilesLocked(s)}
	l.dropTailLocked() // the tail is the active segment's
	l.segs = append(l.segs, ns)
	p.files = append(p.files, l.txnRolledLocked(s, ns)...)
	l.unflushed = 0
	l.unsealed = append(l.unsealed, p)
	if !l.sealRunning {
		l.sealRunning = true
		l.sealers.Add(1)
		go l.sealLoop()
	}
	return nil
}

// pendingSeal is a roll's flush: the sealed segment s to fsync, the side
// files to write (their bytes taken under mu at the roll), and the offset
// the recovery point may move to once all of it is durable.
type pendingSeal struct {
	s     *segment
	upTo  int64
	files []sideFile
}

type sideFile struct {
	name string
	data []byte
}

// sealLoop flushes the segments sealed by rolls, oldest first, holding
// syncMu but not mu. It is started by a roll when none runs, ends when
// nothing is left (or the log failed or closed), and Close waits for it.
// It takes syncMu for one seal at a time, not for the whole queue: while
// appends keep rolling, a Maintain, Sync or Close waiting for syncMu gets
// in between two seals (holding it across the queue starved retention for
// as long as a stream of rolls lasted).
func (l *Log) sealLoop() {
	defer l.sealers.Done()
	for {
		l.syncMu.Lock()
		l.mu.Lock()
		if len(l.unsealed) == 0 || l.usableLocked() != nil {
			l.sealRunning = false
			l.mu.Unlock()
			l.syncMu.Unlock()
			return
		}
		l.mu.Unlock()
		_, _ = l.flushSeal() // a failure is sticky; the next turn sees it
		l.syncMu.Unlock()
	}
}

// flushSeals makes the rolls pending when it is called durable without
// holding mu while it does I/O; rolls queued meanwhile are left to the
// caller (lockQuiet flushes them under mu), so a stream of appends cannot
// keep it chasing new rolls forever. The caller holds syncMu, so nobody
// else flushes them or changes the sealed segments meanwhile.
func (l *Log) flushSeals() error {
	l.mu.Lock()
	n := len(l.unsealed)
	l.mu.Unlock()
	for ; n > 0; n-- {
		done, err := l.flushSeal()
		if done || err != nil {
			return err
		}
	}
	return nil
}

// flushSeal makes the oldest pending roll durable without holding mu
// while it does I/O; done says nothing was pending. The caller holds
// syncMu.
func (l *Log) flushSeal() (done bool, err error) {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	if len(l.unsealed) == 0 {
		l.mu.Unlock()
		return true, nil
	}
	l.mu.Unlock()
	// Once per log: a log created without fsyncs gets its directory
	// entries and state file durable before its first fsync.
	if err := l.syncNewDir(); err != nil {
		return false, err
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	if len(l.unsealed) == 0 {
		l.mu.Unlock()
		return true, nil
	}
	p, st := l.unsealed[0], l.sealStateLocked()
	l.mu.Unlock()
	err = l.writeSeal(p, st)
	l.mu.Lock()
	err = l.sealDoneLocked(p, st, err)
	l.mu.Unlock()
	return false, err
}

// flushSealsLocked is flushSeals under mu, for the rare paths that hold mu
// already and find a roll queued; the caller holds syncMu.
func (l *Log) flushSealsLocked() error {
	for len(l.unsealed) > 0 {
		if err := l.usableLocked(); err != nil {
			return err
		}
		if err := l.syncNewDirLocked(); err != nil {
			return err
		}
		p, st := l.unsealed[0], l.sealStateLocked()
		if err := l.sealDoneLocked(p, st, l.writeSeal(p, st)); err != nil {
			return err
		}
	}
	return nil
}

// sealStateLocked is the state file to write once the first pending roll
// is durable. Nothing else writes the state file or moves the start
// offset meanwhile: they hold syncMu, as the flush does.
func (l *Log) sealStateLocked() logState {
	return l.stateLocked(max(l.recoveryPoint, l.unsealed[0].upTo))
}

// writeSeal fsyncs p's segment, writes its side files atomically, fsyncs
// the directory (the new segment's entry included), then saves st. It
// touches no field guarded by mu.
func (l *Log) writeSeal(p *pendingSeal, st logState) error {
	path := p.s.path(l.dir)
	cf, err := l.files.acquire(l.fs, path)
	if err != nil {
		return fmt.Errorf("segments: open %s: %w", path, err)
	}
	err = cf.f.Sync()
	l.files.release(cf)
	if err != nil {
		return fmt.Errorf("segments: fsync %s: %w", path, err)
	}
	for _, f := range p.files {
		if err := writeFileAtomicNoDirSync(l.fs, l.dir, f.name, f.data); err != nil {
			if strings.HasSuffix(f.name, txnIndexSuffix) {
				// As before: a missing .txnindex is rebuilt by a replay.
				l.logger().Warn("segments: cannot write transaction index", "file", f.name, "err", err)
				continue
			}
			return fmt.Errorf("segments: write index: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("segments: sync dir: %w", err)
	}
	if err := l.writeState(st); err != nil {
		return fmt.Errorf("segments: write %s: %w", stateFile, err)
	}
	return nil
}

// sealDoneLocked records the end of p's flush: a failure is sticky, a
// success moves the recovery point to p.upTo.
func (l *Log) sealDoneLocked(p *pendingSeal, st logState, err error) error {
	if err != nil {
		return l.failLocked(err)
	}
	if len(l.unsealed) == 0 || l.unsealed[0] != p {
		return nil // dropped by a reopen meanwhile
	}
	l.unsealed = l.unsealed[1:]
	p.s.indexOnDisk = true
	l.recoveryPoint = max(l.recoveryPoint, p.upTo)
	// savedAt stays: the owner's clock (Options.Now) is read on its own
	// goroutines only, and Maintain's checkpoint just comes sooner.
	l.savedRP, l.cleanOnDisk = st.RecoveryPoint, false
	return nil
}

// lockQuiet takes syncMu and mu with no roll's flush pending or running,
// for changes to sealed segments' files (truncation, deletion, close):
// pending flushes run first without mu, one queued meanwhile under it.
// Retention (Maintain, every pass) does not: it leaves a segment whose
// flush is queued alone instead of flushing it under mu. A failed flush is sticky, for the caller's usableLocked to see.
func (l *Log) lockQuiet() {
	l.syncMu.Lock()
	_ = l.flushSeals()
	l.mu.Lock()
	_ = l.flushSealsLocked()
}

func (l *Log) unlockQuiet() {
	l.mu.Unlock()
	l.syncMu.Unlock()
}

// Roll seals the active segment and starts a new one at the end offset,
// unless the active segment is empty.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.rollLocked(l.end)
}

// sealLocked writes the index files of s, each atomically and durably, so
// they are whole or absent. s must be loaded.
func (l *Log) sealLocked(s *segment) error {
	for _, f := range l.indexFilesLocked(s) {
		if err := writeFileAtomic(l.fs, l.dir, f.name, f.data); err != nil {
			return fmt.Errorf("segments: write index: %w", err)
		}
	}
	s.indexOnDisk = true
	return nil
}

// indexFilesLocked encodes the index files of s. s must be loaded.
func (l *Log) indexFilesLocked(s *segment) []sideFile {
	return []sideFile{
		{segmentName(s.base, indexSuffix), s.idx.encodeOffsets()},
		{segmentName(s.base, timeIndexSuffix), s.idx.encodeTimes(s.rel(s.next), s.maxTs)},
	}
}
