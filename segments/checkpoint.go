package segments

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/runnel/runnel/segments/statefile"
	"github.com/runnel/runnel/segments/vfs"
)

const (
	stateFile  = "log.state"
	epochsFile = "leader-epoch-checkpoint"
	tmpSuffix  = ".tmp"
)

// logState is the content of the state file (package statefile's codec).
type logState = statefile.State

// epochEntry says that a leader epoch wrote its first record at an offset.
type epochEntry = statefile.Epoch

// writeFileAtomic replaces dir/name with data durably: write a temporary
// file, fsync it, rename it over name, fsync the directory.
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	if err := writeFileAtomicNoDirSync(fs, dir, name, data); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// writeFileAtomicNoDirSync is writeFileAtomic but the directory fsync, for
// a caller that writes several files and fsyncs the directory once after.
func writeFileAtomicNoDirSync(fs vfs.FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	if err := writeFileSync(fs, tmp, data); err != nil {
		return err
	}
	return fs.Rename(tmp, filepath.Join(dir, name))
}

// writeFileSync creates path with data and fsyncs it.
func writeFileSync(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readFile returns the content of path; a missing file is (nil, nil).
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// WriteFileAtomic durably replaces dir/name with data through fs as the
// log's own checkpoints are written (temporary file name+".tmp", fsync,
// rename, directory fsync): a crash at any step leaves the old file or the
// new one whole. For a caller's file beside the logs (the broker's
// high-watermark checkpoint of all its partitions).
func WriteFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	return writeFileAtomic(fs, dir, name, data)
}

// ReadFile returns the content of path through fs; a missing file is
// (nil, nil).
func ReadFile(fs vfs.FS, path string) ([]byte, error) { return readFile(fs, path) }

// WriteSideFile durably replaces a small file of the caller's (e.g. the
// server's high-watermark checkpoint) in the log's directory: through the
// log's FS, temporary file, fsync, rename, directory fsync, the same way
// the log's own checkpoints are written. name is a plain file name that is
// none of the log's own files.
func (l *Log) WriteSideFile(name string, data []byte) error {
	if err := checkSideFileName(name); err != nil {
		return err
	}
	if err := writeFileAtomic(l.fs, l.dir, name, data); err != nil {
		return fmt.Errorf("segments: write %s: %w", name, err)
	}
	return nil
}

// ReadSideFile returns a file written by WriteSideFile; nil, nil when there
// is none.
func (l *Log) ReadSideFile(name string) ([]byte, error) {
	if err := checkSideFileName(name); err != nil {
		return nil, err
	}
	return readFile(l.fs, filepath.Join(l.dir, name))
}

func checkSideFileName(name string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || strings.HasSuffix(name, tmpSuffix) ||
		strings.HasSuffix(name, ".log") || strings.HasSuffix(name, ".index") || strings.HasSuffix(name, ".timeindex") || strings.HasSuffix(name, txnIndexSuffix) ||
		name == stateFile || name == epochsFile {
		return fmt.Errorf("segments: %q is not a side file name", name)
	}
	return nil
}
