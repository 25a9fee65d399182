package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"
)

// encodeLegacyEpochs writes the previous release's leader-epoch-checkpoint
// file (Kafka's text format), for seeds and round trips.
func encodeLegacyEpochs(es []Epoch) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.Start)
	}
	return b.Bytes()
}

// FuzzDecode feeds arbitrary bytes to the state file decoder (every
// version, epoch lines and checksums included; half of the inputs of
// version 4 with a checksum that matches) and the previous release's
// leader-epoch-checkpoint decoder: what they accept round-trips, and what
// they allocate stays within alloctest's bound of the input (the bytes come
// from disk and are not trusted).
func FuzzDecode(f *testing.F) {
	f.Add(State{RecoveryPoint: 5, StartOffset: 2, Clean: true, End: 9, ActiveBase: 3, ActiveSize: 100}.Encode())
	f.Add(State{RecoveryPoint: 5, StartOffset: 2, HasEpochs: true, Epochs: []Epoch{{1, 0}, {4, 10}}}.Encode())
	f.Add(State{RecoveryPoint: 9, StartOffset: 9, Restarting: true}.Encode())
	f.Add([]byte("runnel-log-state 1\nrecovery-point 7\nstart-offset 0\nend\n"))
	f.Add([]byte("runnel-log-state 2\nrecovery-point 7\nstart-offset 0\n" + strings.Repeat("epoch 1 0\n", 50) + "end\n"))
	f.Add(encodeLegacyEpochs([]Epoch{{1, 0}, {4, 10}}))
	f.Add([]byte("0\n99999999\n1 0\n"))
	f.Add([]byte("runnel-log-state 3\nrecovery-point 9\nstart-offset 9\nrestarting\nend\n"))
	f.Add([]byte("runnel-log-state 4\nrecovery-point 7\nstart-offset 0\nend 00000000\n")) // a bad checksum
	f.Add([]byte("runnel-log-state 4\nrecovery-point 7\nstart-offset 0\nepoch 1 0\n"))    // checksummed by the target
	f.Add(flipped(State{RecoveryPoint: 5, StartOffset: 2, Epochs: []Epoch{{1, 0}}, Clean: true, End: 9, ActiveBase: 3, ActiveSize: 100}.Encode(), 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.HasPrefix(b, []byte("runnel-log-state 4\n")) && len(b)%2 == 1 {
			// Half of the version-4 inputs get their checksum made right,
			// so that what follows it in the decoder is fuzzed too.
			b = fmt.Appendf(slices.Clip(b), "end %08x\n", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		}
		var st State
		var es []Epoch
		var serr, eerr error
		if n := alloctest.Bytes(func() { st, serr = Decode(b) }); n > alloctest.Limit(len(b), 0) {
			t.Fatalf("Decode allocated %d bytes for %d", n, len(b))
		}
		if n := alloctest.Bytes(func() { es, eerr = DecodeLegacyEpochs(b) }); n > alloctest.Limit(len(b), 0) {
			t.Fatalf("DecodeLegacyEpochs allocated %d bytes for %d", n, len(b))
		}
		if serr == nil {
			st2, err := Decode(st.Encode())
			want := st
			want.HasEpochs = true // Encode writes version 4
			if err != nil || fmt.Sprint(st2) != fmt.Sprint(want) {
				t.Fatalf("state does not round-trip: %+v %+v %v", want, st2, err)
			}
		}
		if eerr == nil {
			if es2, err := DecodeLegacyEpochs(encodeLegacyEpochs(es)); err != nil || !slices.Equal(es2, es) {
				t.Fatalf("epochs do not round-trip: %v %v %v", es, es2, err)
			}
		}
	})
}

// flipped returns a copy of b with its byte i changed (its low bit
// flipped).
func flipped(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 1
	return c
}

// TestDecodeVersions: files of versions 1 to 3 (no checksum) and 4 decode,
// and every state encodes as version 4, with a checksum; epoch lines in a
// version-1 file, epochs out of order, an epoch line after the clean line,
// lines after "end", a restarting line in a version-2 file or beside a
// clean line or epochs, a version-4 file without its checksum or with a
// wrong one, an end line inside it, a checksum in a file of version 1 to 3,
// and version 5 do not.
func TestDecodeVersions(t *testing.T) {
	v1, err := Decode([]byte("runnel-log-state 1\nrecovery-point 7\nstart-offset 2\nclean 9 3 100\nend\n"))
	if err != nil || v1.HasEpochs || v1.RecoveryPoint != 7 || v1.StartOffset != 2 || !v1.Clean || v1.End != 9 {
		t.Fatalf("version 1: %+v %v", v1, err)
	}
	v2, err := Decode([]byte("runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nepoch 1 0\nepoch 3 5\nend\n"))
	if err != nil || !v2.HasEpochs || !slices.Equal(v2.Epochs, []Epoch{{1, 0}, {3, 5}}) {
		t.Fatalf("version 2: %+v %v", v2, err)
	}
	v3, err := Decode([]byte("runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nrestarting\nend\n"))
	if err != nil || !v3.HasEpochs || !v3.Restarting || v3.StartOffset != 7 {
		t.Fatalf("version 3: %+v %v", v3, err)
	}
	// The checksum of a version-4 file, computed by hand once: CRC-32C of
	// the bytes before the end line.
	const v4text = "runnel-log-state 4\nrecovery-point 7\nstart-offset 2\nepoch 1 0\nepoch 3 5\n"
	v4file := fmt.Sprintf("%send %08x\n", v4text, crc32.Checksum([]byte(v4text), crc32.MakeTable(crc32.Castagnoli)))
	v4, err := Decode([]byte(v4file))
	if err != nil || !v4.HasEpochs || v4.RecoveryPoint != 7 || v4.StartOffset != 2 || !slices.Equal(v4.Epochs, []Epoch{{1, 0}, {3, 5}}) {
		t.Fatalf("version 4: %+v %v", v4, err)
	}
	if b := v2.Encode(); string(b) != v4file {
		t.Fatalf("state encoded as %q, want %q", b, v4file)
	}
	for _, st := range []State{v1, v2, v3, v4} {
		b := st.Encode()
		if !bytes.HasPrefix(b, []byte("runnel-log-state 4\n")) {
			t.Fatalf("%+v encoded as %q", st, b)
		}
		want := st
		want.HasEpochs = true
		if got, err := Decode(b); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q decoded as %+v, %v; want %+v", b, got, err, want)
		}
	}
	v4restarting := string(v3.Encode())
	if !strings.Contains(v4restarting, "\nrestarting\n") {
		t.Fatalf("restarting state encoded as %q", v4restarting)
	}
	withSum := func(text string) string {
		return fmt.Sprintf("%send %08x\n", text, crc32.Checksum([]byte(text), crc32.MakeTable(crc32.Castagnoli)))
	}
	for _, bad := range []string{
		"runnel-log-state 1\nrecovery-point 7\nstart-offset 2\nepoch 1 0\nend\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nepoch 3 0\nepoch 1 5\nend\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nepoch 1 5\nepoch 3 0\nend\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nclean 9 3 100\nepoch 1 0\nend\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nend\nepoch 1 0\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 2\nepoch 2147483648 0\nend\n",
		"runnel-log-state 2\nrecovery-point 7\nstart-offset 7\nrestarting\nend\n",
		"runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nrestarting\nclean 7 7 0\nend\n",
		"runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nclean 7 7 0\nrestarting\nend\n",
		"runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nepoch 1 0\nrestarting\nend\n",
		"runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nrestarting\nepoch 1 0\nend\n",
		"runnel-log-state 3\nrecovery-point 7\nstart-offset 7\nrestarting\nrestarting\nend\n",
		"runnel-log-state 4\nrecovery-point 7\nstart-offset 2\nend\n",
		strings.Replace(v4file, "runnel-log-state 4", "runnel-log-state 2", 1),
		strings.Replace(v4file, "runnel-log-state 4", "runnel-log-state 3", 1),
		v4file[:len(v4file)-1],
		v4file + "\n",
		v4file + "epoch 4 9\n",
		strings.ToUpper(v4file[len(v4file)-9:]), // an upper-case checksum
		withSum("runnel-log-state 4\nrecovery-point 7\nstart-offset 2\nend\n"),
		withSum("runnel-log-state 4\nrecovery-point 7\n"),
		withSum("runnel-log-state 4\nrecovery-point 7\nstart-offset 7\nrestarting\nepoch 1 0\n"),
		withSum("runnel-log-state 5\nrecovery-point 7\nstart-offset 2\n"),
		"runnel-log-state 5\nrecovery-point 7\nstart-offset 2\nend\n",
	} {
		if st, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q decoded as %+v", bad, st)
		}
	}
}

// TestDecodeRefusesEveryFlip: every byte of version-4 files, changed to
// each other value in turn, makes a file Decode refuses (a flip in a digit
// of the recovery point, start offset, an epoch or the clean mark would
// otherwise be trusted by Open); a change in the body is reported as
// ErrChecksum.
func TestDecodeRefusesEveryFlip(t *testing.T) {
	for _, st := range []State{
		{RecoveryPoint: 1234, StartOffset: 56, HasEpochs: true, Epochs: []Epoch{{1, 56}, {7, 890}}, Clean: true, End: 4321, ActiveBase: 3000, ActiveSize: 98765},
		{RecoveryPoint: 90, StartOffset: 90, HasEpochs: true, Restarting: true},
		{HasEpochs: true},
	} {
		good := st.Encode()
		if got, err := Decode(good); err != nil || fmt.Sprint(got) != fmt.Sprint(st) {
			t.Fatalf("%q decoded as %+v, %v", good, got, err)
		}
		body := bytes.LastIndex(good[:len(good)-1], []byte("\n")) + 1
		for i := range good {
			for x := range 256 {
				if byte(x) == good[i] {
					continue
				}
				b := slices.Clone(good)
				b[i] = byte(x)
				got, err := Decode(b)
				if err == nil {
					t.Fatalf("byte %d of %q changed to %q: decoded as %+v", i, good, byte(x), got)
				}
				if i >= len("runnel-log-state 4\n") && i < body-1 && !errors.Is(err, ErrChecksum) {
					t.Fatalf("byte %d of %q changed to %q: %v, want %v", i, good, byte(x), err, ErrChecksum)
				}
			}
		}
	}
}
