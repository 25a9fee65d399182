package segments

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// SideFile is a file of the caller's that CloseAll writes into a log's
// directory as WriteSideFile would.
type SideFile struct {
	Name string
	Data []byte
	// Optional says the file already in the directory (or its absence)
	// is still true, only older: CloseAll may leave it as it is when it
	// leaves the log to be recovered at its next open (see CloseAll).
	Optional bool
}

// Closing is one log for CloseAll and the side files to write with it.
type Closing struct {
	Log  *Log
	Side []SideFile
}

// CloseAll closes many logs as Close closes each, and writes their side
// files as WriteSideFile does. When it returns nil every log is as durable
// as after its own Close. Close makes a written log durable with a dozen
// fsyncs (its data, each index and checkpoint file and their directory),
// each of which commits the filesystem's journal: a node closing 20,000
// logs one after another took minutes. With fsync, a handle of
// vfs.FSSyncer opened on the filesystem before the logs were written,
// CloseAll does no fsync of its own and closes each log one of two ways:
//
//   - A log whose segments from the recovery point saved in its state
//     file on hold at most Config.RescanBytes, and none of whose side
//     files must be written (SideFile.Optional), is left as a crash would
//     leave it, with nothing written: one filesystem sync makes its data
//     and directory entries durable, and its next Open recovers it from
//     that recovery point, rescanning those few bytes (no write or fsync
//     unless a tail is torn). Creating and renaming a clean close's four
//     small files cost ~2 ms a log on ext4, most of a node's exit time.
//   - Any other written log gets a clean close: its files are written
//     beside their names without any fsync, the filesystem synced, the
//     index and side files renamed into place, synced, the state files
//     renamed (the clean mark, the last to land, as in Close), synced.
//
// So one filesystem sync when every log is of the first kind, three
// otherwise, whatever the number of logs. A crash before the last leaves
// each log as a crash before its Close would, or clean with all its files;
// a crash after the first sync loses no byte of any log.
//
// With a nil fsync, each log is closed by Close and its side files written
// by WriteSideFile. Either way at most parallel logs are worked on at once.
// A log that fails is closed all the same (its next Open recovers it) and
// its error joined to the others'.
func CloseAll(fsync vfs.FSSync, logs []Closing, parallel int) error {
	_, err := CloseAllTimed(fsync, logs, parallel)
	return err
}

// CloseTimes is where a CloseAll's time went, for the log line a node
// writes at exit (a SIGTERM's exit once took 32.7 s at 300,000 logs on a
// shared disk, with nothing to say which part).
type CloseTimes struct {
	// Logs is the time closing the logs and writing their files took
	// (each log's own fsyncs too when there is no filesystem sync).
	Logs time.Duration
	// Syncs is the time in filesystem syncs, and SyncCount their number.
	Syncs     time.Duration
	SyncCount int
	// Renames is the time renaming the files written into place.
	Renames time.Duration
}

// CloseAllTimed is CloseAll, saying where its time went.
func CloseAllTimed(fsync vfs.FSSync, logs []Closing, parallel int) (CloseTimes, error) {
	var times CloseTimes
	start := time.Now()
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	if fsync == nil {
		forEach(len(logs), parallel, func(i int) {
			c := logs[i]
			for _, f := range c.Side {
				if err := c.Log.WriteSideFile(f.Name, f.Data); err != nil {
					fail(err)
				}
			}
			if err := c.Log.Close(); err != nil {
				fail(err)
			}
		})
		times.Logs = time.Since(start)
		return times, errors.Join(errs...)
	}
	// files[i] are the names written beside logs[i]'s own, the state file
	// last; nil when there is nothing to rename (or it failed).
	files := make([][]string, len(logs))
	var left atomic.Bool // a log left for its next open to rescan
	forEach(len(logs), parallel, func(i int) {
		names, rescan, err := logs[i].Log.closeUnsynced(logs[i].Side)
		if err != nil {
			fail(err)
		}
		files[i] = names
		if rescan {
			left.Store(true)
		}
	})
	times.Logs = time.Since(start)
	renames := slices.ContainsFunc(files, func(names []string) bool { return len(names) > 0 })
	if !renames && !left.Load() {
		// Nothing written, clean already or failed: nothing to make
		// durable (Close does no fsync for those either).
		return times, errors.Join(errs...)
	}
	rename := func(state bool) {
		defer func(start time.Time) { times.Renames += time.Since(start) }(time.Now())
		forEach(len(logs), parallel, func(i int) {
			l := logs[i].Log
			for _, name := range files[i] {
				if (name == stateFile) != state {
					continue
				}
				path := filepath.Join(l.dir, name)
				if err := l.fs.Rename(path+tmpSuffix, path); err != nil {
					fail(fmt.Errorf("segments: close %s: %w", l.dir, err))
					files[i] = nil // its state file stays as it was
					return
				}
			}
		})
	}
	sync := func(what string) bool {
		defer func(start time.Time) { times.Syncs += time.Since(start); times.SyncCount++ }(time.Now())
		if err := fsync.Sync(); err != nil {
			fail(fmt.Errorf("segments: close logs, sync the filesystem %s: %w", what, err))
			return false
		}
		return true
	}
	if sync("after writing their files") && renames {
		rename(false)
		if sync("after renaming their index files") {
			rename(true)
			sync("after renaming their state files")
		}
	}
	return times, errors.Join(errs...)
}

// forEach calls f(0) to f(n-1), at most parallel at once.
func forEach(n, parallel int, f func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(min(parallel, n), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				f(i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// closeUnsynced closes the log as Close does but with no fsync. A log
// with little to rescan (rescanLocked) is closed with nothing written:
// rescan says the caller's filesystem sync must make its data durable.
// Otherwise it writes the files a clean close writes (index files of the
// active segment, its transaction index, the clean state file) and side,
// each beside its name (tmpSuffix), and returns their names, the state
// file last. The caller syncs them and renames them into place
// (CloseAll); a crash before then leaves the log as it was before, and
// Open removes what is beside it.
func (l *Log) closeUnsynced(side []SideFile) (names []string, rescan bool, err error) {
	defer l.sealers.Wait()
	l.lockQuiet()
	defer l.unlockQuiet()
	if l.closed {
		return nil, false, nil
	}
	files := make([]sideFile, 0, len(side)+4)
	for _, f := range side {
		if err := checkSideFileName(f.Name); err != nil {
			return nil, false, err
		}
		files = append(files, sideFile{f.Name, f.Data})
	}
	rescan = l.rescanLocked(side)
	var own []sideFile
	if !rescan {
		own, err = l.cleanFilesLocked()
	}
	l.closed = true
	l.unsealed = nil
	l.dropTailLocked()
	l.forgetFilesLocked()
	if rescan || err != nil {
		return nil, rescan, err
	}
	files = append(files, own...)
	names = make([]string, 0, len(files))
	for _, f := range files {
		if err := writeFileNoSync(l.fs, filepath.Join(l.dir, f.name+tmpSuffix), f.data); err != nil {
			if strings.HasSuffix(f.name, txnIndexSuffix) {
				// As in Close: a missing .txnindex is rebuilt by a replay.
				l.logger().Warn("segments: cannot write transaction index", "file", f.name, "err", err)
				continue
			}
			return nil, false, fmt.Errorf("segments: close %s: write %s: %w", l.dir, f.name, err)
		}
		names = append(names, f.name)
	}
	return names, false, nil
}

// rescanLocked reports whether CloseAll may close the log by writing
// nothing, leaving its next Open to recover it from the recovery point in
// its state file (savedRP; 0, as Open reads it, when there is none): it
// has something to make durable, none of side must be written, and the
// segments from the one holding that point on, all Open would scan, hold
// at most RescanBytes. Whatever the log wrote since that point (data, a
// roll's new segment, index files of its active segment from an earlier
// clean close, now stale) is what a crash would leave too, and Open's
// recovery scans those segments without trusting any of their files.
func (l *Log) rescanLocked(side []SideFile) bool {
	if !l.closeWritesLocked() {
		return false
	}
	for _, f := range side {
		if !f.Optional {
			return false
		}
	}
	return l.smallRescanLocked()
}

// smallRescanLocked reports whether an open after a crash now would scan
// at most RescanBytes: the segments from the saved recovery point on.
func (l *Log) smallRescanLocked() bool {
	if l.cfg.RescanBytes < 0 {
		return false
	}
	var n int64
	for _, s := range l.segs[l.segmentForLocked(l.savedRP):] {
		n += s.size
	}
	return n <= l.cfg.RescanBytes
}

// closeWritesLocked reports whether a clean close of the log writes
// anything: not for a log with a storage error (reopening recovers),
// clean on disk already, or never written.
func (l *Log) closeWritesLocked() bool {
	return l.err == nil && !l.cleanOnDisk && !(l.dirUnsynced && l.end == l.start)
}

// cleanFilesLocked is what closeLocked writes, without its fsyncs: the
// active segment's index files unless on disk, its transaction index, and
// the clean state file (last), whose recovery point is the log end: the
// caller makes the data durable before that file lands. Nothing when
// closeWritesLocked says so.
func (l *Log) cleanFilesLocked() ([]sideFile, error) {
	if !l.closeWritesLocked() {
		return nil, nil
	}
	s := l.active()
	var files []sideFile
	if !s.indexOnDisk {
		if err := l.loadLocked(s); err != nil {
			return nil, err
		}
		files = append(files, l.indexFilesLocked(s)...)
	}
	if l.txnReady && s.txns.known {
		files = append(files, l.txnIndexFileLocked(s, l.ongoing, l.end))
	}
	st := l.stateLocked(l.end)
	st.Clean, st.End, st.ActiveBase, st.ActiveSize = true, l.end, s.base, s.size
	return append(files, sideFile{stateFile, st.Encode()}), nil
}

// writeFileNoSync creates path with data, without fsync.
func writeFileNoSync(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
