package segments

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// probeBytes is what Recover writes and fsyncs to learn that the disk takes
// writes again: a few pages, so a disk with almost no room stays failed
// rather than flapping on every append.
const probeBytes = 1 << 20

// rewriteChunk bounds the buffer Recover rewrites unsynced segments with.
const rewriteChunk = 1 << 20

// probeFile is written and removed by Recover; its ".tmp" suffix makes Open
// delete it if a crash leaves it behind.
const probeFile = "storage-probe" + tmpSuffix

// Err returns the sticky error (wrapping ErrStorage) that makes the log
// refuse changes, or nil. Safe for concurrent use, and takes no lock: a
// broker's storage and maintenance loops ask every log changed lately,
// each round (issue 19: at 300,000 logs the lock's cold word was most of
// the storage loop's time).
func (l *Log) Err() error {
	if e := l.errSeen.Load(); e != nil {
		return *e
	}
	return nil
}

// Recover brings a failed log back without a restart, once the disk takes
// writes again: it writes and fsyncs a probe file, then reopens the
// directory in place with crash recovery (a torn tail is cut back to the
// last whole batch), rewrites and fsyncs everything past the last durable
// recovery point (after a failed fsync the page cache may hold pages the
// kernel no longer means to write, so they are dirtied again), and clears
// the error. Nothing acknowledged is lost: an append is acknowledged only
// after its write (and, with flush.messages=1, its fsync) succeeded.
//
// Recover returns nil when the log has not failed, ErrClosed when it is
// closed, and the probe's or the reopening's error (the log stays failed)
// otherwise. It holds the log's locks while it reopens, so it is meant to be
// called by one owner with a backoff, not on a request path.
func (l *Log) Recover() error {
	l.mu.Lock()
	err := l.usableLocked()
	l.mu.Unlock()
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	if err := l.probe(); err != nil {
		return fmt.Errorf("%w: probe %s: %w", ErrStorage, l.dir, err)
	}
	l.maintainMu.Lock()
	defer l.maintainMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	if err := l.reopenLocked(); err != nil {
		return fmt.Errorf("%w: reopen %s: %w", ErrStorage, l.dir, err)
	}
	l.logger().Info("segments: log recovered; appends accepted again", "end", l.end)
	return nil
}

// probe writes, fsyncs and removes probeFile.
func (l *Log) probe() error {
	path := filepath.Join(l.dir, probeFile)
	err := writeFileSync(l.fs, path, make([]byte, probeBytes))
	if rerr := l.fs.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// reopenLocked opens the directory again as a fresh Log would and, when
// that worked, makes it durable and takes its state over.
func (l *Log) reopenLocked() error {
	l.forgetFilesLocked()
	l.dropTailLocked()
	fresh := &Log{dir: l.dir, fs: l.fs, files: l.files, baseLogger: l.baseLogger, now: l.now, cfg: l.cfg}
	err := fresh.openLocked()
	if err == nil {
		err = fresh.resyncLocked()
	}
	if err != nil {
		fresh.forgetFilesLocked()
		return err
	}
	l.segs, l.start, l.end = fresh.segs, fresh.start, fresh.end
	l.recoveryPoint, l.savedRP, l.savedAt = fresh.recoveryPoint, fresh.savedRP, fresh.savedAt
	l.unflushed, l.oldestUnsync = 0, time.Time{}
	l.epochs, l.cleanedTo, l.tombstoneDue = fresh.epochs, 0, 0
	l.legacyEpochs.Store(fresh.legacyEpochs.Load())
	l.cleanOnDisk, l.dirUnsynced = fresh.cleanOnDisk, fresh.dirUnsynced
	l.ongoing, l.txnReady = fresh.ongoing, fresh.txnReady
	l.unsealed = nil // the fresh open rescanned past the saved recovery point
	l.truncGen++     // a syncTo snapshot taken before must not move the recovery point
	l.segsGen++      // nor a compaction pass swap segments it read before
	l.err = nil
	l.errSeen.Store(nil)
	return nil
}

// resyncLocked rewrites and fsyncs the segments from the one holding the
// saved recovery point on, then saves the state: afterwards everything the
// log holds is durable.
func (l *Log) resyncLocked() error {
	buf := make([]byte, rewriteChunk)
	for _, s := range l.segs[l.segmentForLocked(l.savedRP):] {
		if err := l.rewriteLocked(s, buf); err != nil {
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	l.dirUnsynced = false
	l.recoveryPoint = l.end
	return l.saveStateLocked(false)
}

// rewriteLocked writes every byte of s back in place and fsyncs it.
func (l *Log) rewriteLocked(s *segment, buf []byte) error {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return err
	}
	defer l.files.release(cf)
	for pos := int64(0); pos < s.size; {
		n, err := cf.f.ReadAt(buf[:min(int64(len(buf)), s.size-pos)], pos)
		if n == 0 {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if _, err := cf.f.WriteAt(buf[:n], pos); err != nil {
			return err
		}
		pos += int64(n)
	}
	return cf.f.Sync()
}
