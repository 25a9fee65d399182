package segments

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments/vfs"
)

// rec is a record for building test batches; a nil value is a tombstone.
type rec struct {
	key, value []byte
	ts         int64
}

// buildBatch encodes an uncompressed producer RecordBatch v2 (base offset 0)
// with a valid CRC-32C, through the one codec (recordbatch.Build).
func buildBatch(recs []rec) []byte {
	nr := make([]recordbatch.NewRecord, len(recs))
	for i, r := range recs {
		nr[i] = recordbatch.NewRecord{Key: r.key, Value: r.value, Timestamp: r.ts}
	}
	return recordbatch.Build(nr)
}

// valueBatch builds n records of size bytes each with timestamps ts, ts+1...
func valueBatch(n, size int, ts int64) []byte {
	recs := make([]rec, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = rec{key: []byte{byte(i)}, value: v, ts: ts + int64(i)}
	}
	return buildBatch(recs)
}

// decodeBatches splits a chunk's bytes with kmsg and returns the batches.
func decodeBatches(t testing.TB, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("decode batch: %v", err)
		}
		n := int(rb.Length) + recordbatch.PrefixLen
		out = append(out, rb)
		b = b[n:]
	}
	return out
}

func mustOpen(t testing.TB, dir string, cfg Config, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := Open(dir, cfg, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.Append(b, epoch)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

func readAll(t testing.TB, l *Log, off int64, maxBytes int) []byte {
	t.Helper()
	c, err := l.Read(off, maxBytes, -1)
	if err != nil {
		t.Fatalf("read %d: %v", off, err)
	}
	defer c.Close()
	b, err := c.Bytes()
	if err != nil {
		t.Fatalf("bytes: %v", err)
	}
	return b
}

// workers runs loops beside a test's own work (for the race detector):
// each loop calls its function with i = 0, 1, ... on a goroutine of its
// own until halt, or until the function fails. Tests defer halt, so a
// failing test stops its loops before the log they use closes.
type workers struct {
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex // guards errs
	errs     []error
}

func newWorkers() *workers { return &workers{stop: make(chan struct{})} }

// loop starts fn's loop.
func (w *workers) loop(fn func(i int) error) {
	w.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			if err := fn(i); err != nil {
				w.mu.Lock()
				w.errs = append(w.errs, err)
				w.mu.Unlock()
				return
			}
		}
	})
}

// halt stops the loops, waits for them and returns what they failed with.
func (w *workers) halt() error {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// powerCuts records the filesystems a power cut would leave: while on,
// one before each operation of an ErrorFS over mem (injector is its
// Injector), unsynced tails torn at random by rng (nil: none kept).
// observe, when set, sees each operation (under the same lock) with the
// index of the cut taken before it.
type powerCuts struct {
	mem     *vfs.MemFS
	rng     *rand.Rand
	observe func(op vfs.Op, path string, cut int)
	mu      sync.Mutex // guards on and cuts
	on      bool
	cuts    []powerCut
}

// powerCut is the filesystem left by a power cut before operation at.
type powerCut struct {
	fs *vfs.MemFS
	at string
}

func (p *powerCuts) injector(op vfs.Op, path string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.cuts = append(p.cuts, powerCut{p.mem.Crash(p.rng), fmt.Sprint(op, " ", path)})
		if p.observe != nil {
			p.observe(op, path, len(p.cuts)-1)
		}
	}
	return nil
}

// start starts recording.
func (p *powerCuts) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = true
}

// stop stops recording, with one more cut after every operation, "after
// what".
func (p *powerCuts) stop(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	p.cuts = append(p.cuts, powerCut{p.mem.Crash(p.rng), what})
}

// take returns the cuts recorded since the last take.
func (p *powerCuts) take() []powerCut {
	p.mu.Lock()
	defer p.mu.Unlock()
	cuts := p.cuts
	p.cuts = nil
	return cuts
}
