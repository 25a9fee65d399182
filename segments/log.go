package segments

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// Log is one partition's log. All methods are safe for concurrent use. They
// serialize on one mutex, except that an append waiting for its fsync
// (flush.messages) waits without it, a segment sealed by a roll is fsynced
// and its index files written without it (see sealLoop), and a Chunk
// returned by Read is used without it.
type Log struct {
	dir        string
	fs         vfs.FS
	files      *FileCache
	tails      *TailCache   // nil: no tail kept (tail.go)
	baseLogger *slog.Logger // logger() adds the log
	now        func() time.Time
	onFail     func() // Options.OnFail

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
	// segPath is the path of the segment based at segPathBase, the last
	// one an append or read asked for (segPathLocked); "" until then.
	segPath     string
	segPathBase int64
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
	return &Log{dir: dir, fs: opts.FS, files: opts.Files, tails: opts.Tails, baseLogger: opts.Logger, now: opts.Now, onFail: opts.OnFail, cfg: cfg}, nil
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
		l.logger().Error("segments: log failed; appends refused until it recovers", "err", err)
		if l.onFail != nil {
			l.onFail()
		}
	}
	return err
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
		l.logger().Warn("segments: close before delete", "err", err)
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

// logger is the log's logger: the one it was opened with, naming the log's
// directory. Made when a message is logged, not kept: With made a handler
// and a preformatted attribute for every log (~210 bytes a log, 63 MB of a
// node's heap at 300,000 partitions, issue 19) for messages most logs
// never write.
func (l *Log) logger() *slog.Logger { return l.baseLogger.With("log", l.dir) }
