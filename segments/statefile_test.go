package segments

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel/segments/statefile"
	"github.com/runnel/runnel/segments/vfs"
)

// warnings is a slog handler that keeps the messages of warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// logContent is what a reader can observe of a log: its offsets, its
// bytes and the end of each leader epoch.
func logContent(t *testing.T, l *Log) string {
	t.Helper()
	var b strings.Builder
	start, end := l.StartOffset(), l.EndOffset()
	fmt.Fprintf(&b, "[%d, %d)", start, end)
	var data []byte
	for off := start; off < end; {
		chunk := readAll(t, l, off, 1<<20)
		if len(chunk) == 0 {
			break
		}
		bs := decodeBatches(t, chunk)
		last := bs[len(bs)-1]
		off = last.FirstOffset + int64(last.LastOffsetDelta) + 1
		data = append(data, chunk...)
	}
	fmt.Fprintf(&b, " %d bytes %x", len(data), data)
	for e := int32(-1); e <= 10; e++ {
		ge, gend, err := l.EndOffsetForEpoch(e)
		fmt.Fprintf(&b, " epoch %d: %d/%d %v", e, ge, gend, err)
	}
	return b.String()
}

// TestOpenDistrustsFlippedStateFile: a log's state file with a digit
// changed (in its recovery point, start offset, an epoch, the clean mark's
// end, base or size, or its checksum) is not trusted: Open logs a warning
// and recovers every segment, so the log opens as it does with no state
// file at all: every record, the same end, the epochs of its batches. For a
// cleanly closed log that is the log as it was closed. Without the
// checksum, a changed end in the clean mark was taken as the log's end and
// a changed recovery point or epoch as the log's.
func TestOpenDistrustsFlippedStateFile(t *testing.T) {
	const dir = "/flip/p"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 700
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	for i := range 30 {
		mustAppend(t, l, valueBatch(1+i%3, 30, int64(i)), int32(1+i/7))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{FS: mem})
	for i := range 12 {
		mustAppend(t, l, valueBatch(2, 30, int64(100+i)), int32(6+i/5))
	}
	// A power cut now leaves the state file written at the first append
	// after the reopen: not clean, its recovery point at the end then.
	crashed := mem.Crash(rand.New(rand.NewPCG(1, 2)))
	closed := logContent(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fs   *vfs.MemFS
	}{{"clean", mem}, {"crashed", crashed}} {
		t.Run(c.name, func(t *testing.T) {
			good, err := readFile(c.fs, dir+"/"+stateFile)
			if err != nil || good == nil {
				t.Fatalf("state file: %q %v", good, err)
			}
			if st, err := statefile.Decode(good); err != nil || st.Clean != (c.name == "clean") || len(st.Epochs) == 0 || st.RecoveryPoint == 0 {
				t.Fatalf("state file %q: %+v %v", good, st, err)
			}
			// What the log holds, found without the state file.
			img := c.fs.Crash(nil)
			if err := img.Remove(dir + "/" + stateFile); err != nil {
				t.Fatal(err)
			}
			l := mustOpen(t, dir, cfg, Options{FS: img})
			want := logContent(t, l)
			l.Close()
			if c.name == "clean" && want != closed {
				t.Fatalf("the log recovered without its state file is\n%s\nclosed as\n%s", want, closed)
			}
			flips := 0
			for i, ch := range good {
				if !strings.ContainsRune("0123456789abcdef", rune(ch)) {
					continue
				}
				// Another digit, and the byte with its low bit flipped (a
				// digit still, or the end line's hex digit made another
				// one or none); statefile's TestDecodeRefusesEveryFlip
				// tries every value of every byte on the codec alone.
				next := "0123456789"[(strings.IndexByte("0123456789", ch)+1)%10]
				for _, d := range slices.Compact([]byte{next, ch ^ 1}) {
					img := c.fs.Crash(nil)
					flipped := bytes.Clone(good)
					flipped[i] = d
					if err := writeFileAtomic(img, dir, stateFile, flipped); err != nil {
						t.Fatal(err)
					}
					w := &warnings{}
					l, err := Open(dir, cfg, Options{FS: img, Logger: slog.New(w)})
					if err != nil {
						t.Fatalf("state file %q: open: %v", flipped, err)
					}
					got := logContent(t, l)
					checkEpochsMatchBatches(t, l, fmt.Sprintf("state file %q", flipped))
					l.Close()
					if got != want {
						t.Fatalf("state file %q: the log opened as\n%s\nnot as\n%s", flipped, got, want)
					}
					if msgs := w.take(); !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "bad state file") }) {
						t.Fatalf("state file %q: no warning of a bad state file, only %q", flipped, msgs)
					}
					flips++
				}
			}
			t.Logf("%d flipped state files of %q", flips, good)
		})
	}
}
