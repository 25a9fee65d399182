package segments

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/runnel/runnel/segments/vfs"
)

const (
	stateFile  = "log.state"
	epochsFile = "leader-epoch-checkpoint"
	tmpSuffix  = ".tmp"
)

// logState is the content of the state file: the recovery point, the log
// start offset and, after a clean Close, what Open needs to skip recovery.
type logState struct {
	recoveryPoint int64
	startOffset   int64
	clean         bool
	end           int64 // clean only: log end offset
	activeBase    int64 // clean only: base of the last segment
	activeSize    int64 // clean only: its size
}

func (s logState) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "runnel-log-state 1\nrecovery-point %d\nstart-offset %d\n", s.recoveryPoint, s.startOffset)
	if s.clean {
		fmt.Fprintf(&b, "clean %d %d %d\n", s.end, s.activeBase, s.activeSize)
	}
	b.WriteString("end\n")
	return b.Bytes()
}

var errBadCheckpoint = errors.New("segments: malformed checkpoint")

func decodeState(b []byte) (logState, error) {
	var s logState
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 || lines[0] != "runnel-log-state 1" {
		return s, errBadCheckpoint
	}
	var sawEnd bool
	for _, ln := range lines[1:] {
		f := strings.Fields(ln)
		if len(f) == 0 {
			continue
		}
		n, err := parseInts(f[1:])
		switch {
		case err != nil:
			return s, err
		case f[0] == "recovery-point" && len(n) == 1:
			s.recoveryPoint = n[0]
		case f[0] == "start-offset" && len(n) == 1:
			s.startOffset = n[0]
		case f[0] == "clean" && len(n) == 3:
			s.clean, s.end, s.activeBase, s.activeSize = true, n[0], n[1], n[2]
		case f[0] == "end" && len(n) == 0:
			sawEnd = true
		default:
			return s, errBadCheckpoint
		}
	}
	if !sawEnd {
		return s, errBadCheckpoint
	}
	return s, nil
}

func parseInts(fs []string) ([]int64, error) {
	var out []int64
	for _, f := range fs {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return nil, errBadCheckpoint
		}
		out = append(out, n)
	}
	return out, nil
}

// epochEntry says that leader epoch epoch wrote its first record at start.
type epochEntry struct {
	epoch int32
	start int64
}

// encodeEpochs writes Kafka's leader-epoch-checkpoint text format: version,
// count, then "epoch startOffset" lines.
func encodeEpochs(es []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

func decodeEpochs(b []byte) ([]epochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, errBadCheckpoint
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, errBadCheckpoint
	}
	es := make([]epochEntry, 0, n)
	for _, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, errBadCheckpoint
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, errBadCheckpoint
		}
		if k := len(es); k > 0 && (int32(e) <= es[k-1].epoch || o < es[k-1].start) {
			return nil, errBadCheckpoint
		}
		es = append(es, epochEntry{int32(e), o})
	}
	return es, nil
}

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
