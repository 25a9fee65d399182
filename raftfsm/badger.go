package raftfsm

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
)

// memTableSize is the state store's memtable: one transaction holds at
// most 15% of it.
const memTableSize = 16 << 20

// OpenBadger opens a small-footprint badger database in dir. Metadata is tiny
// compared to badger's defaults (64 MiB memtables, 256 MiB block cache), so
// the sizes are cut down; several nodes may share one process in tests. One
// transaction holds at most 15% of a memtable (2.4 MiB): the limit on the
// writes of one command and on one raft log entry. It refuses a dir whose
// filesystem has less than StateDiskFloor free (diskroom.go).
func OpenBadger(dir string, syncWrites bool, log *slog.Logger) (*badger.DB, error) {
	if err := roomBeforeOpen(dir); err != nil {
		return nil, err
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(syncWrites).
		WithLogger(badgerLogger{log: log, flushes: new(flushWatch)}).
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseTableSize(2 << 20).
		WithValueLogFileSize(16 << 20).
		WithBlockCacheSize(4 << 20).
		WithNumCompactors(2)
	db, err := badger.Open(opts)
	if err != nil && (errors.Is(err, z.NewFile) || strings.Contains(err.Error(), z.NewFile.Error())) {
		// A process killed while badger was creating a memtable leaves a
		// .mem file that makes the first Open fail with z.NewFile, though the
		// file is now initialised and a second Open succeeds (a known badger
		// v4 bug); seen after kill -9 during shutdown.
		log.Warn("raftfsm: reopening badger after an interrupted memtable creation", "dir", dir)
		db, err = badger.Open(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("raftfsm: open badger %s: %w", dir, err)
	}
	return db, nil
}

// badgerLogger routes badger's printf-style logs to slog; badger's info
// chatter is logged at debug level. A failed background flush goes to
// flushes too (flushwatch.go).
type badgerLogger struct {
	log     *slog.Logger
	flushes *flushWatch
}

func (l badgerLogger) Errorf(f string, a ...any) {
	line := trim(f, a)
	l.log.Error(line, "subsystem", "badger")
	if l.flushes != nil && isFlushFailure(line) {
		l.flushes.failed(line)
	}
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn(trim(f, a), "subsystem", "badger")
}
func (l badgerLogger) Infof(f string, a ...any)  { l.log.Debug(trim(f, a), "subsystem", "badger") }
func (l badgerLogger) Debugf(f string, a ...any) { l.log.Debug(trim(f, a), "subsystem", "badger") }

func trim(f string, a []any) string { return strings.TrimSpace(fmt.Sprintf(f, a...)) }
