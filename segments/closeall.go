package segments

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/runnel/runnel/segments/vfs"
)

// SideFile is a file of the caller's that CloseAll writes into a log's
// directory as WriteSideFile would.
type SideFile struct {
	Name string
	Data []byte
}

// Closing is one log for CloseAll and the side files to write with it.
type Closing struct {
	Log  *Log
	Side []SideFile
}

// CloseAll closes many logs as Close closes each, and writes their side
// files as WriteSideFile does. When it returns nil every log is as durable
// and as clean on disk as after its own Close. Close makes a written log
// durable with a dozen fsyncs (its data, each index and checkpoint file and
// their directory), each of which commits the filesystem's journal: a node
// closing 20,000 logs one after another took minutes. With fsync, a handle
// of vfs.FSSyncer opened on the filesystem before the logs were written,
// CloseAll writes every log's files beside their names without any fsync,
// syncs the filesystem once, renames the index and side files into place,
// syncs, renames the state files (the clean mark, the last to land, as in
// Close), and syncs again: three filesystem syncs in all, whatever the
// number of logs. A crash before the last leaves each log as a crash
// before its Close would, or clean with all its files.
//
// With a nil fsync, each log is closed by Close and its side files written
// by WriteSideFile. Either way at most parallel logs are worked on at once.
// A log that fails is closed all the same (its next Open recovers it) and
// its error joined to the others'.
func CloseAll(fsync vfs.FSSync, logs []Closing, parallel int) error {
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
		return errors.Join(errs...)
	}
	// files[i] are the names written beside logs[i]'s own, the state file
	// last; nil when there is nothing to rename (or it failed).
	files := make([][]string, len(logs))
	forEach(len(logs), parallel, func(i int) {
		var err error
		if files[i], err = logs[i].Log.closeUnsynced(logs[i].Side); err != nil {
			fail(err)
		}
	})
	if !slices.ContainsFunc(files, func(names []string) bool { return len(names) > 0 }) {
		// Nothing written, clean already or failed: nothing to make
		// durable (Close does no fsync for those either).
		return errors.Join(errs...)
	}
	rename := func(state bool) {
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
		if err := fsync.Sync(); err != nil {
			fail(fmt.Errorf("segments: close logs, sync the filesystem %s: %w", what, err))
			return false
		}
		return true
	}
	if sync("after writing their files") {
		rename(false)
		if sync("after renaming their index files") {
			rename(true)
			sync("after renaming their state files")
		}
	}
	return errors.Join(errs...)
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

// closeUnsynced closes the log as Close does but with no fsync: it writes
// the files a clean close writes (index files of the active segment, its
// transaction index, the clean state file) and side, each beside its name
// (tmpSuffix), and returns their names, the state file last. The caller
// syncs them and renames them into place (CloseAll); a crash before then
// leaves the log as it was before, and Open removes what is beside it.
func (l *Log) closeUnsynced(side []SideFile) ([]string, error) {
	defer l.sealers.Wait()
	l.lockQuiet()
	defer l.unlockQuiet()
	if l.closed {
		return nil, nil
	}
	files := make([]sideFile, 0, len(side)+4)
	for _, f := range side {
		if err := checkSideFileName(f.Name); err != nil {
			return nil, err
		}
		files = append(files, sideFile{f.Name, f.Data})
	}
	own, err := l.cleanFilesLocked()
	l.closed = true
	l.unsealed = nil
	l.forgetFilesLocked()
	if err != nil {
		return nil, err
	}
	files = append(files, own...)
	names := make([]string, 0, len(files))
	for _, f := range files {
		if err := writeFileNoSync(l.fs, filepath.Join(l.dir, f.name+tmpSuffix), f.data); err != nil {
			if strings.HasSuffix(f.name, txnIndexSuffix) {
				// As in Close: a missing .txnindex is rebuilt by a replay.
				l.logger.Warn("segments: cannot write transaction index", "file", f.name, "err", err)
				continue
			}
			return nil, fmt.Errorf("segments: close %s: write %s: %w", l.dir, f.name, err)
		}
		names = append(names, f.name)
	}
	return names, nil
}

// cleanFilesLocked is what closeLocked writes, without its fsyncs: the
// active segment's index files unless on disk, its transaction index, and
// the clean state file (last), whose recovery point is the log end: the
// caller makes the data durable before that file lands. Nothing for a log
// with a storage error (reopening recovers), clean on disk already, or
// never written.
func (l *Log) cleanFilesLocked() ([]sideFile, error) {
	if l.err != nil || l.cleanOnDisk || (l.dirUnsynced && l.end == l.start) {
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
	st := logState{recoveryPoint: l.end, startOffset: l.start,
		clean: true, end: l.end, activeBase: s.base, activeSize: s.size}
	return append(files, sideFile{stateFile, st.encode()}), nil
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
