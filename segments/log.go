package segments

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// Log is one partition's log. All methods are safe for concurrent use. They
// serialize on one mutex, except that an append waiting for its fsync
// (flush.messages) waits without it, a segment sealed by a roll is fsynced
// and its index files written without it (see sealLoop), and a Chunk
// returned by Read is used without it.
type Log struct {
	dir    string
	fs     vfs.FS
	files  *FileCache
	tails  *TailCache // nil: no tail kept (tail.go)
	logger *slog.Logger
	now    func() time.Time
	onFail func() // Options.OnFail

	// compactHook, when set by a test, runs between a compaction pass's
	// rewriting and its swap, without any lock held.
	compactHook func()

	// maintainMu serializes Maintain calls (and so compaction passes).
	// Lock order: maintainMu, syncMu, Log.mu, FileCache.mu.
	maintainMu sync.Mutex

	// syncMu serializes the fsyncs appends wait for, done without mu so
	// reads and further appends go on meanwhile (group commit), and the
	// flushes of segments sealed by rolls. Whoever changes or removes a
	// sealed segment's files holds it (lockQuiet). Lock order: syncMu,
	// Log.mu, FileCache.mu.
	syncMu sync.Mutex

	// legacyEpochs says the directory holds the leader-epoch-checkpoint
	// file of a previous release, for writeState to remove (atomic: state
	// files are written without mu too).
	legacyEpochs atomic.Bool

	// sealers counts the running sealLoop goroutine; Close waits for it.
	sealers sync.WaitGroup

	// mu guards every field below.
	mu            sync.Mutex
	cfg           Config
	segs          []*segment   // by base offset; the last one is active
	start         int64        // log start offset
	end           int64        // log end offset
	recoveryPoint int64        // every batch below it is fsynced
	savedRP       int64        // recovery point in the state file
	savedAt       time.Time    // when the state file was last written
	unflushed     int64        // records appended since the last fsync
	oldestUnsync  time.Time    // when the first of them was appended
	truncGen      uint64       // bumped when the log is cut back
	segsGen       uint64       // bumped when a sealed segment changes or goes
	epochs        []epochEntry // see epochs.go
	cleanedTo     int64        // compaction has cleaned the segments below it
	tombstoneDue  int64        // ms when a kept tombstone may be dropped, 0 = none
	cleanOnDisk   bool         // the state file says "clean": remove before mutating
	opening       bool         // in openLocked: see readTxnIndexLocked
	err           error        // sticky write/fsync error
	dirUnsynced   bool         // created without fsyncs; see syncNewDirLocked
	closed        bool
	// errSeen is err for Err, which reads it without mu; stored with it.
	errSeen atomic.Pointer[error]
	// unsealed are the segments sealed by rolls whose fsync, index files
	// and directory entries are not durable yet, oldest first. The
	// recovery point does not pass the first one until its flush is done.
	unsealed    []*pendingSeal
	sealRunning bool // a sealLoop goroutine is started
	// Transactions (txn.go): the open ones at the end, valid once
	// txnReady; each segment keeps its own in segment.txns.
	ongoing  map[int64]OngoingTxn
	txnReady bool
	// tail is the latest batches of the active segment, kept in memory
	// for reads (tail.go); nil until the first append with tails set.
	tail *logTail
}

// Open opens (recovering if needed) or creates the log in dir.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	l, err := newLog(dir, cfg, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.openLocked(); err != nil {
		l.forgetFilesLocked()
		return nil, fmt.Errorf("segments: open %s: %w", dir, err)
	}
	return l, nil
}

// Create makes a new, empty log in dir, which must not exist (its parent
// must): the cheap way to add a partition, a directory and one empty file
// without fsyncs, where Open first lists and reads what the directory
// holds. When dir exists it fails with an error wrapping fs.ErrExist, and
// the caller opens it instead.
func Create(dir string, cfg Config, opts Options) (*Log, error) {
	l, err := newLog(dir, cfg, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := mkdirNew(l.fs, dir); err != nil {
		return nil, fmt.Errorf("segments: create %s: %w", dir, err)
	}
	if err := l.createFirstLocked(0); err != nil {
		l.forgetFilesLocked()
		return nil, fmt.Errorf("segments: create %s: %w", dir, err)
	}
	return l, nil
}

// newLog is the Log Open and Create start from: cfg checked, opts
// defaulted, nothing on disk touched yet.
func newLog(dir string, cfg Config, opts Options) (*Log, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	dir = filepath.Clean(dir) // segment.path joins names to it without cleaning
	return &Log{dir: dir, fs: opts.FS, files: opts.Files, tails: opts.Tails, logger: opts.Logger.With("log", dir), now: opts.Now, onFail: opts.OnFail, cfg: cfg}, nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) nowMs() int64 { return l.now().UnixMilli() }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// failLocked makes err sticky, wrapped in ErrStorage, and returns it.
func (l *Log) failLocked(err error) error {
	if !errors.Is(err, ErrStorage) {
		err = fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if l.err == nil {
		l.err = err
		l.errSeen.Store(&err)
		l.dropTailLocked() // Recover may cut a torn write back
		l.logger.Error("segments: log failed; appends refused until it recovers", "err", err)
		if l.onFail != nil {
			l.onFail()
		}
	}
	return err
}

// Append validates one or more concatenated RecordBatch v2 and appends them
// atomically, assigning base offsets and the partition leader epoch in place
// (batches is modified). A rejected call leaves the log unchanged; errors
// wrap ErrCorruptBatch, ErrBatchTooLarge, ErrClosed or the sticky I/O error.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	hs, err := l.splitForAppend(batches, recordbatch.CountExact)
	if err != nil {
		return AppendInfo{}, err
	}
	next := l.end
	for i := range hs {
		hs[i].BaseOffset = next
		hs[i].Epoch = leaderEpoch
		next = hs[i].NextOffset()
	}
	info, syncTo, err := l.appendLocked(batches, hs, func() {
		pos := 0
		for _, h := range hs {
			recordbatch.SetBaseOffset(batches[pos:], h.BaseOffset)
			recordbatch.SetEpoch(batches[pos:], leaderEpoch)
			pos += int(h.Size)
		}
	})
	l.mu.Unlock()
	return l.ackAfterSync(info, syncTo, err)
}

// splitForAppend validates batches outside the lock and returns their
// headers with l.mu held, the log still usable; on error mu is not held.
func (l *Log) splitForAppend(batches []byte, rule recordbatch.CountRule) ([]recordbatch.Header, error) {
	l.mu.Lock()
	limit := int64(l.cfg.MaxMessageBytes)
	rules := recordbatch.Rules{ExactOffsets: true, NeedKeys: l.cfg.compact(), MaxInflated: l.cfg.MaxInflatedBytes,
		FramingOnly: l.cfg.FramingOnly}
	l.mu.Unlock()
	hs, err := recordbatch.Split(batches, limit, rule)
	if err == nil && rule == recordbatch.CountExact {
		err = recordbatch.ValidateAll(batches, hs, rules)
	}
	if err != nil {
		return nil, fmt.Errorf("segments: append: %w", err)
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	return hs, nil
}

// ackAfterSync waits, when the flush policy asks for it, until the log is
// fsynced up to syncTo before acknowledging an append.
func (l *Log) ackAfterSync(info AppendInfo, syncTo int64, err error) (AppendInfo, error) {
	if err != nil {
		return AppendInfo{}, err
	}
	if syncTo > 0 {
		if err := l.syncTo(syncTo); err != nil {
			return AppendInfo{}, err
		}
	}
	return info, nil
}

// AppendReplicated appends batches that already carry their offsets and
// leader epochs, as a follower copies them from the leader. Batches may have
// been compacted (fewer records than offsets). The first base offset must be
// >= EndOffset and offsets must increase. Neither field is rewritten.
func (l *Log) AppendReplicated(batches []byte) (AppendInfo, error) {
	hs, err := l.splitForAppend(batches, recordbatch.CountCompacted)
	if err != nil {
		return AppendInfo{}, err
	}
	next := l.end
	for i, h := range hs {
		if h.BaseOffset < next {
			l.mu.Unlock()
			return AppendInfo{}, fmt.Errorf("segments: append: %w: batch %d has base offset %d below %d", recordbatch.ErrCorruptBatch, i, h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	info, syncTo, err := l.appendLocked(batches, hs, nil)
	l.mu.Unlock()
	return l.ackAfterSync(info, syncTo, err)
}

// appendLocked writes validated batches whose headers (with the offsets they
// will have) are hs; assign, when set, rewrites offsets in buf after the log
// has rolled if needed. syncTo > 0 asks the caller to wait for an fsync up
// to that offset (after releasing mu) before acknowledging.
func (l *Log) appendLocked(buf []byte, hs []recordbatch.Header, assign func()) (info AppendInfo, syncTo int64, err error) {
	first, last := hs[0].BaseOffset, hs[len(hs)-1].LastOffset()
	if err := l.txnReadyLocked(); err != nil {
		return info, 0, l.failLocked(err)
	}
	s := l.active()
	if err := l.loadLocked(s); err != nil {
		return info, 0, l.failLocked(err)
	}
	if l.shouldRollLocked(s, int64(len(buf)), last, l.nowMs()) {
		if err := l.rollLocked(first); err != nil {
			return info, 0, err
		}
		s = l.active()
	}
	if err := l.markDirtyLocked(); err != nil {
		return info, 0, err
	}
	if assign != nil {
		assign()
	}
	if err := l.writeLocked(s, buf); err != nil {
		return info, 0, err
	}
	info = AppendInfo{BaseOffset: first, LastOffset: last, MaxTimestamp: -1, LogStartOffset: l.start}
	var records int64
	pos := s.size
	for _, h := range hs {
		s.idx.add(s.base, h, pos, s.maxTs, l.cfg.IndexIntervalBytes)
		if s.rollTs < 0 {
			// segment.ms runs from the wall-clock time of the first append,
			// so batches with old timestamps do not roll every append.
			s.rollTs = l.nowMs()
		}
		s.maxTs = max(s.maxTs, h.MaxTimestamp)
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		records += int64(h.NumRecords)
		pos += h.Size
		l.assignEpochLocked(h.Epoch, h.BaseOffset)
	}
	l.keepTailLocked(s, s.size, buf, hs)
	s.size = pos
	s.next = last + 1
	l.end = last + 1
	l.txnAppendedLocked(buf, hs)
	if l.unflushed == 0 {
		l.oldestUnsync = l.now()
	}
	l.unflushed += records
	if l.unflushed >= l.cfg.FlushMessages {
		return info, l.end, nil
	}
	return info, 0, nil
}

// writeLocked writes buf at the end of s. On failure it cuts the file back
// so no partial batch is left, and the error becomes sticky.
func (l *Log) writeLocked(s *segment, buf []byte) error {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: open %s: %w", s.path(l.dir), err))
	}
	defer l.files.release(cf)
	s.indexOnDisk = false
	if _, err := cf.f.WriteAt(buf, s.size); err != nil {
		if terr := cf.f.Truncate(s.size); terr != nil {
			l.logger.Error("segments: cannot cut back a failed write; recovery will", "err", terr)
		}
		return l.failLocked(fmt.Errorf("segments: write %s: %w", s.path(l.dir), err))
	}
	return nil
}

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
				l.logger.Warn("segments: cannot write transaction index", "file", f.name, "err", err)
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

// StartOffset returns the log start offset.
func (l *Log) StartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// EndOffset returns the log end offset: the offset the next record gets.
func (l *Log) EndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recoveryPoint
}

// Size is the bytes held on disk by the log's segments.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the number of segment files.
func (l *Log) Segments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.segs)
}

// SetConfig applies a changed topic config.
func (l *Log) SetConfig(cfg Config) error {
	cfg, err := cfg.normalized()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	return nil
}

// Config returns the log's configuration.
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// segmentForLocked returns the index of the segment holding off: the last
// one whose base is <= off (0 when off is below every base).
func (l *Log) segmentForLocked(off int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > off })
	return max(i-1, 0)
}

// Close flushes, writes the recovery checkpoint and releases files; it
// returns once the log's sealLoop, if any, has ended.
func (l *Log) Close() error {
	defer l.sealers.Wait()
	l.lockQuiet()
	defer l.unlockQuiet()
	if l.closed {
		return nil
	}
	err := l.closeLocked()
	l.closed = true
	l.unsealed = nil
	l.dropTailLocked()
	l.forgetFilesLocked()
	return err
}

func (l *Log) closeLocked() error {
	if l.err != nil {
		return nil // reopening recovers
	}
	if l.cleanOnDisk {
		return nil
	}
	if l.dirUnsynced && l.end == l.start {
		return nil // never written: nothing to make durable
	}
	s := l.active()
	if err := l.flushLocked(); err != nil {
		return err
	}
	if !s.indexOnDisk {
		if err := l.loadLocked(s); err != nil {
			return err
		}
		if err := l.sealLocked(s); err != nil {
			return l.failLocked(err)
		}
	}
	if l.txnReady && s.txns.known {
		l.saveTxnIndexLocked(s, l.ongoing, l.end)
	}
	return l.saveStateLocked(true)
}

func (l *Log) forgetFilesLocked() {
	paths := make([]string, 0, len(l.segs))
	for _, s := range l.segs {
		paths = append(paths, s.path(l.dir))
	}
	l.files.forgetAll(l.fs, paths)
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Warn("segments: close before delete", "err", err)
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("segments: delete %s: %w", l.dir, err)
	}
	return nil
}

// mkdirNew creates dir, which must not exist (fs.ErrExist), and not its
// parents: with the optional Mkdir of an FS that has one (one call), else
// by Stat and MkdirAll.
func mkdirNew(fsys vfs.FS, dir string) error {
	if m, ok := fsys.(interface{ Mkdir(dir string) error }); ok {
		return m.Mkdir(dir)
	}
	if _, err := fsys.Stat(dir); err == nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
	}
	return fsys.MkdirAll(dir)
}
