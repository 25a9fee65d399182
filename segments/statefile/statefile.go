// Package statefile is the text codec of a segments log's state file,
// log.state (recovery point, log start offset, leader epochs, restart and
// clean-close marks, and since version 4 a CRC-32C of them all in its end
// line; its format, and what a downgrade does, is in package segments'
// doc, Checkpoints), and the decoder of the leader-epoch-checkpoint file
// that releases before the epochs moved into log.state kept beside it. The decoders read untrusted
// bytes from disk: what they allocate is bounded by a small multiple of
// their input (FuzzDecode checks alloctest's bound). No goroutines, no
// state: safe for concurrent use.
package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
	"strings"

	"github.com/runnel/runnel/internal/textline"
)

// State is the content of the state file: the recovery point, the log
// start offset, the leader epochs and, after a clean Close, what Open needs
// to skip recovery.
type State struct {
	RecoveryPoint int64
	StartOffset   int64
	// HasEpochs says the file is of version 2, 3 or 4, which hold the
	// leader epochs; a version-1 file (written before) does not, and the epochs
	// are in the leader-epoch-checkpoint file beside it.
	HasEpochs bool
	Epochs    []Epoch
	// Restarting says the log is being emptied and restarted at
	// StartOffset (Reset, or Truncate below the log start offset): every
	// segment file is a leftover of it, for Open to remove. Version 3 or
	// 4 only; never with Clean or epochs.
	Restarting bool
	Clean      bool
	End        int64 // Clean only: log end offset
	ActiveBase int64 // Clean only: base of the last segment
	ActiveSize int64 // Clean only: its size
}

// Version is the version Encode writes; Decode reads it and the versions
// before it. Version 4 is version 3 with a checksum: its last line is
// "end <CRC-32C of every byte before it, 8 lowercase hex digits>". Every
// file Encode writes has it, so no older version is written any more: a
// release that reads versions 1 to 3 only finds a version-4 file malformed
// (package segments' doc, Checkpoints, says what that does).
const Version = 4

// castagnoli is the table of the checksum's CRC-32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// trailerLen is the length of a version-4 file's last line,
// "end 01234567\n".
const trailerLen = len("end 01234567\n")

// Encode returns the state file's bytes, of version 4 (the restarting line
// included when s is Restarting; HasEpochs is not written, a version-4
// file always holds the epochs).
func (s State) Encode() []byte {
	b := bytes.NewBuffer(make([]byte, 0, 96+24*len(s.Epochs)))
	fmt.Fprintf(b, "runnel-log-state %d\nrecovery-point %d\nstart-offset %d\n", Version, s.RecoveryPoint, s.StartOffset)
	if s.Restarting {
		b.WriteString("restarting\n")
	}
	for _, e := range s.Epochs {
		fmt.Fprintf(b, "epoch %d %d\n", e.Epoch, e.Start)
	}
	if s.Clean {
		fmt.Fprintf(b, "clean %d %d %d\n", s.End, s.ActiveBase, s.ActiveSize)
	}
	fmt.Fprintf(b, "end %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// Empty says the state is the one of a log never written: no file.
func (s State) Empty() bool {
	return s.RecoveryPoint == 0 && s.StartOffset == 0 && !s.Clean && !s.Restarting && len(s.Epochs) == 0
}

// ErrMalformed is the error of both decoders.
var ErrMalformed = errors.New("statefile: malformed checkpoint")

// ErrChecksum is Decode's error for a version-4 file whose checksum does
// not match its bytes (a bit flipped on disk); it wraps ErrMalformed.
var ErrChecksum = fmt.Errorf("%w: CRC-32C mismatch", ErrMalformed)

// Decode parses a state file, of version 1, 2, 3 or 4; a version-4 file
// whose checksum does not match is refused with ErrChecksum. The bytes
// come from disk and are not trusted: what it allocates is bounded by a
// small multiple of len(b) (FuzzDecode checks it), so it splits no line
// into a slice of fields.
func Decode(b []byte) (State, error) {
	var s State
	text := string(b)
	first, rest, ok := strings.Cut(text, "\n")
	v3, v4 := false, false
	switch {
	case !ok:
		return s, ErrMalformed
	case first == "runnel-log-state 1":
	case first == "runnel-log-state 2":
		s.HasEpochs = true
	case first == "runnel-log-state 3":
		s.HasEpochs, v3 = true, true
	case first == "runnel-log-state 4":
		body, sum, ok := cutTrailer(b)
		if !ok {
			return s, ErrMalformed
		}
		if crc32.Checksum(body, castagnoli) != sum {
			return s, ErrChecksum
		}
		// The trailer is the end line: what comes before it has none.
		rest = rest[:len(rest)-trailerLen]
		s.HasEpochs, v3, v4 = true, true, true
	default:
		return s, ErrMalformed
	}
	sawEnd, sawRP, sawStart := v4, false, false
	for ln := range strings.Lines(rest) {
		var f [4]string
		n, ok := textline.Fields(ln, f[:])
		switch {
		case n == 0:
			continue
		case !ok || (sawEnd && !v4):
			return s, ErrMalformed // too many fields, or a line after "end"
		}
		var v [3]int64
		for i := 1; i < n; i++ {
			x, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || x < 0 {
				return s, ErrMalformed
			}
			v[i-1] = x
		}
		switch {
		case f[0] == "recovery-point" && n == 2 && !sawRP:
			s.RecoveryPoint, sawRP = v[0], true
		case f[0] == "start-offset" && n == 2 && !sawStart:
			s.StartOffset, sawStart = v[0], true
		case f[0] == "epoch" && n == 3 && s.HasEpochs && !s.Clean && !s.Restarting:
			e := Epoch{Epoch: int32(v[0]), Start: v[1]}
			if v[0] > math.MaxInt32 {
				return s, ErrMalformed
			}
			if k := len(s.Epochs); k > 0 && (e.Epoch <= s.Epochs[k-1].Epoch || e.Start < s.Epochs[k-1].Start) {
				return s, ErrMalformed
			}
			s.Epochs = append(s.Epochs, e)
		case f[0] == "restarting" && n == 1 && v3 && !s.Restarting && !s.Clean && len(s.Epochs) == 0:
			s.Restarting = true
		case f[0] == "clean" && n == 4 && !s.Clean && !s.Restarting:
			s.Clean, s.End, s.ActiveBase, s.ActiveSize = true, v[0], v[1], v[2]
		case f[0] == "end" && n == 1 && !v4:
			sawEnd = true
		default:
			return s, ErrMalformed
		}
	}
	if !sawEnd || !sawRP || !sawStart {
		return s, ErrMalformed
	}
	return s, nil
}

// cutTrailer splits a version-4 file into what precedes its last line,
// "end <crc>\n", and the CRC that line holds, in lowercase hex only (so
// that no two spellings of a checksum exist).
func cutTrailer(b []byte) (body []byte, sum uint32, ok bool) {
	if len(b) < trailerLen+1 || b[len(b)-trailerLen-1] != '\n' {
		return nil, 0, false
	}
	body, last := b[:len(b)-trailerLen], b[len(b)-trailerLen:]
	if !bytes.HasPrefix(last, []byte("end ")) || last[trailerLen-1] != '\n' {
		return nil, 0, false
	}
	for _, c := range last[4 : trailerLen-1] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		default:
			return nil, 0, false
		}
		sum = sum<<4 | uint32(d)
	}
	return body, sum, true
}

// Epoch says that leader epoch Epoch wrote its first record at Start.
type Epoch struct {
	Epoch int32
	Start int64
}

// DecodeLegacyEpochs reads the leader-epoch-checkpoint file the previous
// release kept beside a version-1 state file (Kafka's text format: a
// version line "0", a count line, then one "epoch startOffset" line per
// epoch), bounded in what it allocates as Decode is.
func DecodeLegacyEpochs(b []byte) ([]Epoch, error) {
	text := string(b)
	version, rest, ok1 := strings.Cut(text, "\n")
	count, rest, ok2 := strings.Cut(rest, "\n")
	if !ok1 || !ok2 || strings.TrimSpace(version) != "0" {
		return nil, ErrMalformed
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 0 || n > strings.Count(rest, "\n")+1 {
		return nil, ErrMalformed
	}
	es := make([]Epoch, 0, n)
	for ln := range strings.Lines(rest) {
		var f [2]string
		if k, ok := textline.Fields(ln, f[:]); !ok || k != 2 || len(es) == n {
			return nil, ErrMalformed
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, ErrMalformed
		}
		if k := len(es); k > 0 && (int32(e) <= es[k-1].Epoch || o < es[k-1].Start) {
			return nil, ErrMalformed
		}
		es = append(es, Epoch{int32(e), o})
	}
	if len(es) != n {
		return nil, ErrMalformed
	}
	return es, nil
}
