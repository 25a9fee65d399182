package statefile

import (
	"bytes"
	"fmt"
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

// FuzzDecode feeds arbitrary bytes to the state file decoder (both
// versions, epoch lines included) and the previous release's
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
	f.Fuzz(func(t *testing.T, b []byte) {
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
			want.HasEpochs = true // Encode writes version 2 or 3
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

// TestDecodeVersions: a version-1 file (no epochs), a version-2 file and
// a version-3 one (restarting) decode, and a restarting state encodes as
// version 3, any other as version 2; epoch lines in a version-1 file,
// epochs out of order, an epoch line after the clean line, lines after
// "end", a restarting line in a version-2 file or beside a clean line or
// epochs, and version 4 do not.
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
	if b := v3.Encode(); !bytes.HasPrefix(b, []byte("runnel-log-state 3\n")) {
		t.Fatalf("restarting state encoded as %q", b)
	}
	if b := v2.Encode(); !bytes.HasPrefix(b, []byte("runnel-log-state 2\n")) {
		t.Fatalf("state encoded as %q", b)
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
	} {
		if st, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q decoded as %+v", bad, st)
		}
	}
}
