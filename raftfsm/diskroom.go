package raftfsm

import (
	"errors"
	"fmt"
	"os"
)

// Badger writes its memtable's write-ahead log, its tables and its value
// log through memory-mapped files, created sparse: a write to a page that
// the full filesystem cannot back is not an error but SIGBUS, a fault the
// Go runtime cannot recover (a goroutine dump, exit 2, nothing closed).
// So the state store is never written on a filesystem with less than
// StateDiskFloor free: OpenBadger refuses to open it, a batch of commands
// is not committed (the state machine fail-stops, failstop.go) and a
// snapshot restore stops. The floor is room for the memtable being
// written to reach its flush (memTableSize, plus one transaction) and for
// that flush, or the clean stop's, to write it out as a table (at most
// memTableSize: tables are compressed).
const StateDiskFloor = 2 * memTableSize

// ErrStateDiskLow: the state store's filesystem is below StateDiskFloor.
var ErrStateDiskLow = errors.New("raftfsm: the disk holding the metadata state is too full to write it safely")

// checkDiskRoom is nil while the filesystem holding dir has StateDiskFloor
// free (or cannot be measured), else an ErrStateDiskLow naming the
// figures.
func checkDiskRoom(dir string) error {
	free, ok, err := diskFree(dir)
	if err != nil {
		return fmt.Errorf("raftfsm: measure the free space under %s: %w", dir, err)
	}
	if ok && free < StateDiskFloor {
		return fmt.Errorf("%w: %s has %d bytes free, below the %d badger needs (it writes through memory-mapped files, and a full disk would crash the process); free space on that disk and restart",
			ErrStateDiskLow, dir, free, StateDiskFloor)
	}
	return nil
}

// roomBeforeOpen creates dir and checks its filesystem's room: opening
// badger replays and flushes memtables left by the last run.
func roomBeforeOpen(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("raftfsm: create %s: %w", dir, err)
	}
	return checkDiskRoom(dir)
}
