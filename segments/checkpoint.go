package segments

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
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
// start offset, the leader epochs and, after a clean Close, what Open needs
// to skip recovery.
type logState struct {
	recoveryPoint int64
	startOffset   int64
	// hasEpochs says the file is of version 2, which holds the leader
	// epochs; a version-1 file (written before) does not, and the epochs
	// are in the leader-epoch-checkpoint file beside it.
	hasEpochs  bool
	epochs     []epochEntry
	clean      bool
	end        int64 // clean only: log end offset
	activeBase int64 // clean only: base of the last segment
	activeSize int64 // clean only: its size
}

// stateVersion is written by encode; decodeState reads it and version 1.
const stateVersion = 2

func (s logState) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "runnel-log-state %d\nrecovery-point %d\nstart-offset %d\n", stateVersion, s.recoveryPoint, s.startOffset)
	for _, e := range s.epochs {
		fmt.Fprintf(&b, "epoch %d %d\n", e.epoch, e.start)
	}
	if s.clean {
		fmt.Fprintf(&b, "clean %d %d %d\n", s.end, s.activeBase, s.activeSize)
	}
	b.WriteString("end\n")
	return b.Bytes()
}

// empty says the state is the one of a log never written: no file.
func (s logState) empty() bool {
	return s.recoveryPoint == 0 && s.startOffset == 0 && !s.clean && len(s.epochs) == 0
}

var errBadCheckpoint = errors.New("segments: malformed checkpoint")

// decodeState parses a state file, of version 1 or 2. The bytes come from
// disk and are not trusted: what it allocates is bounded by a small
// multiple of len(b) (FuzzCheckpoints checks it), so it splits no line
// into a slice of fields.
func decodeState(b []byte) (logState, error) {
	var s logState
	text := string(b)
	first, rest, ok := strings.Cut(text, "\n")
	switch {
	case !ok:
		return s, errBadCheckpoint
	case first == "runnel-log-state 1":
	case first == "runnel-log-state 2":
		s.hasEpochs = true
	default:
		return s, errBadCheckpoint
	}
	var sawEnd, sawRP, sawStart bool
	for ln := range strings.Lines(rest) {
		var f [4]string
		n, ok := fields(ln, f[:])
		switch {
		case n == 0:
			continue
		case !ok || sawEnd:
			return s, errBadCheckpoint // too many fields, or a line after "end"
		}
		var v [3]int64
		for i := 1; i < n; i++ {
			x, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || x < 0 {
				return s, errBadCheckpoint
			}
			v[i-1] = x
		}
		switch {
		case f[0] == "recovery-point" && n == 2 && !sawRP:
			s.recoveryPoint, sawRP = v[0], true
		case f[0] == "start-offset" && n == 2 && !sawStart:
			s.startOffset, sawStart = v[0], true
		case f[0] == "epoch" && n == 3 && s.hasEpochs && !s.clean:
			e := epochEntry{epoch: int32(v[0]), start: v[1]}
			if v[0] > math.MaxInt32 {
				return s, errBadCheckpoint
			}
			if k := len(s.epochs); k > 0 && (e.epoch <= s.epochs[k-1].epoch || e.start < s.epochs[k-1].start) {
				return s, errBadCheckpoint
			}
			s.epochs = append(s.epochs, e)
		case f[0] == "clean" && n == 4 && !s.clean:
			s.clean, s.end, s.activeBase, s.activeSize = true, v[0], v[1], v[2]
		case f[0] == "end" && n == 1:
			sawEnd = true
		default:
			return s, errBadCheckpoint
		}
	}
	if !sawEnd || !sawRP || !sawStart {
		return s, errBadCheckpoint
	}
	return s, nil
}

// fields splits ln at runs of spaces, tabs and line ends into f and
// returns how many it found; ok is false when ln has more than len(f).
func fields(ln string, f []string) (n int, ok bool) {
	for {
		ln = strings.TrimLeft(ln, " \t\r\n")
		if ln == "" {
			return n, true
		}
		if n == len(f) {
			return n, false
		}
		i := strings.IndexAny(ln, " \t\r\n")
		if i < 0 {
			i = len(ln)
		}
		f[n], ln = ln[:i], ln[i:]
		n++
	}
}

// epochEntry says that leader epoch epoch wrote its first record at start.
type epochEntry struct {
	epoch int32
	start int64
}

// decodeEpochs reads the leader-epoch-checkpoint file the previous release
// kept beside a version-1 state file (Kafka's text format: a version line
// "0", a count line, then one "epoch startOffset" line per epoch), bounded
// in what it allocates as decodeState is.
func decodeEpochs(b []byte) ([]epochEntry, error) {
	text := string(b)
	version, rest, ok1 := strings.Cut(text, "\n")
	count, rest, ok2 := strings.Cut(rest, "\n")
	if !ok1 || !ok2 || strings.TrimSpace(version) != "0" {
		return nil, errBadCheckpoint
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 0 || n > strings.Count(rest, "\n")+1 {
		return nil, errBadCheckpoint
	}
	es := make([]epochEntry, 0, n)
	for ln := range strings.Lines(rest) {
		var f [2]string
		if k, ok := fields(ln, f[:]); !ok || k != 2 || len(es) == n {
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
	if len(es) != n {
		return nil, errBadCheckpoint
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
