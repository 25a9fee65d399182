// Package statefile is the text codec of a segments log's state file,
// log.state (recovery point, log start offset, leader epochs, restart and
// clean-close marks; its format is in package segments' doc, Checkpoints), and the
// decoder of the leader-epoch-checkpoint file that releases before the
// epochs moved into log.state kept beside it. The decoders read untrusted
// bytes from disk: what they allocate is bounded by a small multiple of
// their input (FuzzDecode checks alloctest's bound). No goroutines, no
// state: safe for concurrent use.
package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// State is the content of the state file: the recovery point, the log
// start offset, the leader epochs and, after a clean Close, what Open needs
// to skip recovery.
type State struct {
	RecoveryPoint int64
	StartOffset   int64
	// HasEpochs says the file is of version 2 or 3, which hold the leader
	// epochs; a version-1 file (written before) does not, and the epochs
	// are in the leader-epoch-checkpoint file beside it.
	HasEpochs bool
	Epochs    []Epoch
	// Restarting says the log is being emptied and restarted at
	// StartOffset (Reset, or Truncate below the log start offset): every
	// segment file is a leftover of it, for Open to remove. Version 3
	// only; never with Clean or epochs.
	Restarting bool
	Clean      bool
	End        int64 // Clean only: log end offset
	ActiveBase int64 // Clean only: base of the last segment
	ActiveSize int64 // Clean only: its size
}

// Version is the newest version Encode writes; Decode reads it and the
// versions before it.
const Version = 3

// Encode returns the state file's bytes: of version 3 when s is
// Restarting, else of version 2 (the same lines but that one, and a
// release that reads no version 3 reads it).
func (s State) Encode() []byte {
	var b bytes.Buffer
	version := 2
	if s.Restarting {
		version = 3
	}
	fmt.Fprintf(&b, "runnel-log-state %d\nrecovery-point %d\nstart-offset %d\n", version, s.RecoveryPoint, s.StartOffset)
	if s.Restarting {
		b.WriteString("restarting\n")
	}
	for _, e := range s.Epochs {
		fmt.Fprintf(&b, "epoch %d %d\n", e.Epoch, e.Start)
	}
	if s.Clean {
		fmt.Fprintf(&b, "clean %d %d %d\n", s.End, s.ActiveBase, s.ActiveSize)
	}
	b.WriteString("end\n")
	return b.Bytes()
}

// Empty says the state is the one of a log never written: no file.
func (s State) Empty() bool {
	return s.RecoveryPoint == 0 && s.StartOffset == 0 && !s.Clean && !s.Restarting && len(s.Epochs) == 0
}

// ErrMalformed is the error of both decoders.
var ErrMalformed = errors.New("statefile: malformed checkpoint")

// Decode parses a state file, of version 1, 2 or 3. The bytes come from
// disk and are not trusted: what it allocates is bounded by a small
// multiple of len(b) (FuzzDecode checks it), so it splits no line
// into a slice of fields.
func Decode(b []byte) (State, error) {
	var s State
	text := string(b)
	first, rest, ok := strings.Cut(text, "\n")
	v3 := false
	switch {
	case !ok:
		return s, ErrMalformed
	case first == "runnel-log-state 1":
	case first == "runnel-log-state 2":
		s.HasEpochs = true
	case first == "runnel-log-state 3":
		s.HasEpochs, v3 = true, true
	default:
		return s, ErrMalformed
	}
	var sawEnd, sawRP, sawStart bool
	for ln := range strings.Lines(rest) {
		var f [4]string
		n, ok := fields(ln, f[:])
		switch {
		case n == 0:
			continue
		case !ok || sawEnd:
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
		case f[0] == "end" && n == 1:
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
		if k, ok := fields(ln, f[:]); !ok || k != 2 || len(es) == n {
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
