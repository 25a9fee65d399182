package segments

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments/vfs"
)

// filledBatch is a batch of n records whose values are size bytes of fill,
// stamped with base offset base and leader epoch epoch, as a follower
// receives it.
func filledBatch(n, size int, fill byte, base int64, epoch int32) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: []byte{byte(i)}, value: bytes.Repeat([]byte{fill}, size), ts: 1000 + int64(i)}
	}
	return stamp(buildBatch(recs), base, epoch)
}

// TestTailDroppedOnTruncate: a follower truncated after an epoch change
// appends its new leader's batches at the offsets it cut, of the same
// sizes: a read there answers the new bytes, not the old ones a tail kept.
func TestTailDroppedOnTruncate(t *testing.T) {
	for _, cut := range []string{"truncate", "reset"} {
		t.Run(cut, func(t *testing.T) {
			l := mustOpen(t, "/t/p", DefaultConfig(), Options{FS: vfs.NewMemFS(), Tails: NewTailCache(1<<20, 0)})
			defer l.Close()
			for base := int64(0); base < 9; base += 3 {
				if _, err := l.AppendReplicated(filledBatch(3, 40, 'a', base, 1)); err != nil {
					t.Fatal(err)
				}
			}
			c, err := l.Read(3, 1<<20, -1)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := c.(*memChunk); !ok {
				t.Fatalf("read of just-appended batches answered by %T, not the tail", c)
			}
			held, _ := c.Bytes()
			from := int64(3)
			if cut == "truncate" {
				err = l.Truncate(3)
			} else {
				from, err = 0, l.Reset(0)
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for base := from; base < 9; base += 3 {
				b := filledBatch(3, 40, 'b', base, 2)
				want = append(want, b...)
				if _, err := l.AppendReplicated(bytes.Clone(b)); err != nil {
					t.Fatal(err)
				}
			}
			if got := readAll(t, l, from, 1<<20); !bytes.Equal(got, want) {
				t.Fatalf("read at %d after %s and new appends: %d bytes, want the %d new ones (same: %v)", from, cut, len(got), len(want), bytes.Equal(got[:min(len(got), len(want))], want[:min(len(got), len(want))]))
			}
			if got, _ := c.Bytes(); !bytes.Equal(got, held) {
				t.Fatalf("a chunk read before the %s changed under its holder", cut)
			}
		})
	}
}

// TestTailReadOpensNoFile: with a file cache of one file shared by two
// logs, each append pushes the other log's file out; a read of what was
// just appended opens and reads no file when the tail answers it, and
// opens the file again without it (the count this test relies on).
func TestTailReadOpensNoFile(t *testing.T) {
	for _, tail := range []bool{true, false} {
		t.Run(fmt.Sprintf("tail=%v", tail), func(t *testing.T) {
			var opens, reads atomic.Int64
			efs := vfs.NewErrorFS(vfs.NewMemFS(), func(op vfs.Op, path string) error {
				if strings.HasSuffix(path, logSuffix) {
					switch op {
					case vfs.OpOpen, vfs.OpCreate:
						opens.Add(1)
					case vfs.OpRead:
						reads.Add(1)
					}
				}
				return nil
			})
			opts := Options{FS: efs, Files: NewFileCache(1)}
			if tail {
				opts.Tails = NewTailCache(1<<20, 0)
			}
			logs := []*Log{mustOpen(t, "/t/a", DefaultConfig(), opts), mustOpen(t, "/t/b", DefaultConfig(), opts)}
			defer func() {
				for _, l := range logs {
					l.Close()
				}
			}()
			for i := range 20 {
				var want [2][]byte
				var at [2]int64
				for j, l := range logs {
					b := filledBatch(1+i%3, 30, byte(i), 0, 0)
					at[j] = mustAppend(t, l, b, 0).BaseOffset
					want[j] = b // Append assigned its offset and epoch in place
				}
				opens.Store(0)
				reads.Store(0)
				for j, l := range logs {
					if got := readAll(t, l, at[j], 1<<20); !bytes.Equal(got, want[j]) {
						t.Fatalf("append %d, log %d: read %d bytes, want the %d appended", i, j, len(got), len(want[j]))
					}
				}
				o, r := opens.Load(), reads.Load()
				if tail && (o != 0 || r != 0) {
					t.Fatalf("append %d: reads of the tail opened %d files and read %d times", i, o, r)
				}
				if !tail && o == 0 {
					t.Fatalf("append %d: reads without a tail opened no file: the count sees nothing", i)
				}
			}
		})
	}
}

// TestTailBudget: the tails of all logs stay within the node's budget,
// the least recently appended logs giving theirs up first, one log's tail
// within its own bound, and a closed log's is given back.
func TestTailBudget(t *testing.T) {
	batch := int64(len(filledBatch(1, 100, 0, 0, 0))) + tailBatchOverhead
	tails := NewTailCache(10*batch, 4*batch)
	opts := Options{FS: vfs.NewMemFS(), Tails: tails}
	var logs []*Log
	for i := range 4 {
		logs = append(logs, mustOpen(t, fmt.Sprintf("/t/%d", i), DefaultConfig(), opts))
		defer logs[i].Close()
	}
	inTail := func(l *Log, off int64) bool {
		c, err := l.Read(off, 1<<20, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, ok := c.(*memChunk)
		return ok
	}
	// 4 batches to each log in turn, 6 to the last: log 0's tail goes
	// when log 2's third batch needs room, log 1's when log 3's third
	// does, and log 3 keeps its 4 newest.
	for i, l := range logs {
		for j := range 4 + 2*(i/3) {
			mustAppend(t, l, filledBatch(1, 100, byte(j), 0, 0), 0)
			if used := tails.Bytes(); used > 10*batch {
				t.Fatalf("tails hold %d bytes, budget %d", used, 10*batch)
			}
		}
	}
	for i, want := range []string{"0000", "0000", "1111", "001111"} {
		got := ""
		for off := range int64(len(want)) {
			got += map[bool]string{false: "0", true: "1"}[inTail(logs[i], off)]
		}
		if got != want {
			t.Errorf("log %d: offsets in its tail %s, want %s", i, got, want)
		}
	}
	if used := tails.Bytes(); used != 8*batch {
		t.Fatalf("tails hold %d bytes, want %d", used, 8*batch)
	}
	// A batch above a log's bound is not kept, and its log's tail goes
	// (what it kept no longer ends the segment).
	mustAppend(t, logs[3], filledBatch(1, int(5*batch), 0, 0, 0), 0)
	if inTail(logs[3], 5) || inTail(logs[3], 6) {
		t.Fatalf("a log kept a batch above its bound, or batches before one it did not keep")
	}
	if used := tails.Bytes(); used != 4*batch {
		t.Fatalf("tails hold %d bytes, want %d", used, 4*batch)
	}
	for _, l := range logs {
		l.Close()
	}
	if used := tails.Bytes(); used != 0 {
		t.Fatalf("closed logs' tails still hold %d bytes", used)
	}
}

// tailPair is two logs driven alike, one with a tail, one without; a third
// log shares the tail's budget and takes its room at random.
type tailPair struct {
	t             *testing.T
	rng           *rand.Rand
	cfg           Config
	memOn, memOff *vfs.MemFS
	tails         *TailCache
	on, off       *Log
	noise         *Log
	epoch         int32
	fromTail      int // reads the tail answered
	held          []heldChunk
}

// heldChunk is a chunk of the tailed log kept across later steps with the
// bytes it gave when read.
type heldChunk struct {
	c    Chunk
	want []byte
}

func (p *tailPair) open() {
	p.on = mustOpen(p.t, "/p", p.cfg, Options{FS: p.memOn, Tails: p.tails})
	p.off = mustOpen(p.t, "/p", p.cfg, Options{FS: p.memOff})
}

// both runs op on both logs and requires the same outcome.
func (p *tailPair) both(what string, op func(l *Log) (any, error)) {
	p.t.Helper()
	a, errA := op(p.on)
	b, errB := op(p.off)
	if fmt.Sprint(a, errA) != fmt.Sprint(b, errB) {
		p.t.Fatalf("%s: with a tail %v %v, without %v %v", what, a, errA, b, errB)
	}
	if errA != nil {
		p.t.Fatalf("%s: %v", what, errA)
	}
}

func (p *tailPair) step() string {
	l, rng := p.off, p.rng
	start, end := l.StartOffset(), l.EndOffset()
	if rng.IntN(4) == 0 {
		if _, err := p.noise.Append(filledBatch(1+rng.IntN(3), rng.IntN(200), 'n', 0, 0), 0); err != nil {
			p.t.Fatal(err)
		}
	}
	if rng.IntN(30) == 0 {
		p.epoch++
	}
	switch x := rng.IntN(100); {
	case x < 35:
		b := filledBatch(1+rng.IntN(4), rng.IntN(120), byte(rng.Uint32()), 0, 0)
		p.both("append", func(l *Log) (any, error) { return l.Append(bytes.Clone(b), p.epoch) })
		return "append"
	case x < 65:
		var buf []byte
		base := end + rng.Int64N(3) // offsets a compaction on the leader left out
		for range 1 + rng.IntN(3) {
			n := 1 + rng.IntN(4)
			buf = append(buf, filledBatch(n, rng.IntN(120), byte(rng.Uint32()), base, p.epoch)...)
			base += int64(n) + rng.Int64N(2)
		}
		p.both("replicate", func(l *Log) (any, error) { return l.AppendReplicated(bytes.Clone(buf)) })
		return "replicate"
	case x < 75:
		to := start + rng.Int64N(end-start+1)
		p.both("truncate", func(l *Log) (any, error) { return nil, l.Truncate(to) })
		return fmt.Sprintf("truncate %d", to)
	case x < 80:
		p.both("roll", func(l *Log) (any, error) { return nil, l.Roll() })
		return "roll"
	case x < 85:
		off := start + rng.Int64N(end-start+1)
		p.both("delete records", func(l *Log) (any, error) { return nil, l.DeleteRecordsBefore(off) })
		return fmt.Sprintf("delete records before %d", off)
	case x < 90:
		cfg := p.cfg
		cfg.RetentionBytes = rng.Int64N(l.Size() + 1)
		p.both("retention", func(l *Log) (any, error) {
			l.SetConfig(cfg)
			defer l.SetConfig(p.cfg)
			return nil, l.Maintain(l.now())
		})
		return "retention"
	case x < 92:
		off := end + rng.Int64N(50)
		p.both("reset", func(l *Log) (any, error) { return nil, l.Reset(off) })
		return fmt.Sprintf("reset %d", off)
	case x < 96:
		p.both("close", func(l *Log) (any, error) { return nil, l.Close() })
		p.open()
		return "reopen"
	default:
		// A power cut: both logs fsynced every append (flush.messages=1).
		p.memOn, p.memOff = p.memOn.Crash(nil), p.memOff.Crash(nil)
		p.open()
		return "crash"
	}
}

// check reads both logs at random offsets with random bounds and requires
// the same bytes, and that every chunk held from earlier reads still
// gives the bytes it gave then.
func (p *tailPair) check(op string) {
	t, rng := p.t, p.rng
	start, end := p.off.StartOffset(), p.off.EndOffset()
	if s, e := p.on.StartOffset(), p.on.EndOffset(); s != start || e != end {
		t.Fatalf("after %s: offsets [%d, %d] with a tail, [%d, %d] without", op, s, e, start, end)
	}
	for range 6 {
		off := start + rng.Int64N(end-start+1)
		if rng.IntN(3) == 0 {
			off = max(start, end-1-rng.Int64N(3)) // most fetches are at the end
		}
		maxBytes := rng.IntN(600) - 10
		maxOffset := int64(-1)
		if rng.IntN(2) == 0 {
			maxOffset = start + rng.Int64N(end-start+3)
		}
		read := func(l *Log) ([]byte, Chunk) {
			c, err := l.Read(off, maxBytes, maxOffset)
			if err != nil {
				t.Fatalf("after %s: read %d (%d bytes, to %d): %v", op, off, maxBytes, maxOffset, err)
			}
			b, err := c.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			if n, err := c.WriteTo(&w); err != nil || n != int64(c.Len()) || !bytes.Equal(w.Bytes(), b) || len(b) != c.Len() {
				t.Fatalf("after %s: chunk of %d bytes wrote %d (%v), Bytes gave %d", op, c.Len(), n, err, len(b))
			}
			return b, c
		}
		got, c := read(p.on)
		want, c2 := read(p.off)
		c2.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("after %s: read %d (%d bytes, to %d): %d bytes with a tail (%T), %d without", op, off, maxBytes, maxOffset, len(got), c, len(want))
		}
		if _, ok := c.(*memChunk); ok {
			p.fromTail++
			if rng.IntN(4) == 0 {
				p.held = append(p.held, heldChunk{c, got})
				continue
			}
		}
		c.Close()
	}
	for _, h := range p.held {
		if b, _ := h.c.Bytes(); !bytes.Equal(b, h.want) {
			t.Fatalf("after %s: a chunk held from an earlier read changed", op)
		}
	}
	if len(p.held) > 20 {
		for _, h := range p.held[:10] {
			h.c.Close()
		}
		p.held = append(p.held[:0], p.held[10:]...)
	}
}

// TestTailMatchesFile drives a log with a tail and one without through
// the same random appends (a leader's and a follower's, with gaps),
// truncations, rolls, deletions, retention, resets, reopens and power
// cuts, and reads both at random offsets with random maxBytes and
// maxOffset after every step: every read gives the same bytes.
func TestTailMatchesFile(t *testing.T) {
	steps, seeds := 800, uint64(4)
	if testing.Short() {
		steps = 300
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 2000
			cfg.IndexIntervalBytes = 150
			cfg.FlushMessages = 1
			cfg.RetentionMs = -1
			// A small budget, with a noise log beside: tails are trimmed
			// and evicted as well as dropped.
			tails := NewTailCache(1500, 900)
			p := &tailPair{t: t, rng: rand.New(rand.NewPCG(seed, 7)), cfg: cfg, memOn: vfs.NewMemFS(), memOff: vfs.NewMemFS(), tails: tails}
			p.noise = mustOpen(t, "/noise", cfg, Options{FS: vfs.NewMemFS(), Tails: tails})
			defer p.noise.Close()
			p.open()
			var ops []string
			for range steps {
				ops = append(ops, p.step())
				if len(ops) > 8 {
					ops = ops[1:]
				}
				p.check(fmt.Sprint(ops))
			}
			p.on.Close()
			p.off.Close()
			if p.fromTail < steps {
				t.Fatalf("the tail answered %d reads of %d: the test tests little", p.fromTail, 6*steps)
			}
			t.Logf("the tail answered %d reads of %d", p.fromTail, 6*steps)
		})
	}
}

// TestTailConcurrent: logs sharing a budget too small for them all append,
// read their newest batches and truncate at once, taking each other's
// room (for the race detector); every read the tail answers gives whole,
// valid batches, the first holding the offset asked. (A file chunk may
// not: a truncation cuts the file under it, as Chunk says.)
func TestTailConcurrent(t *testing.T) {
	const budget = 4 << 10
	tails := NewTailCache(budget, 2<<10)
	var wg sync.WaitGroup
	var fromTail atomic.Int64
	errs := make(chan error, 8)
	for i := range 4 {
		cfg := DefaultConfig()
		cfg.SegmentBytes = 8 << 10
		l := mustOpen(t, fmt.Sprintf("/t/%d", i), cfg, Options{FS: vfs.NewMemFS(), Tails: tails})
		defer l.Close()
		var written atomic.Bool
		wg.Go(func() {
			defer written.Store(true)
			for j := range 400 {
				var err error
				if j%50 == 49 {
					err = l.Truncate(l.EndOffset() / 2)
				} else {
					_, err = l.Append(filledBatch(1+j%3, 50+j%200, byte(j), 0, 0), 0)
				}
				if err == nil && tails.Bytes() > budget {
					err = fmt.Errorf("tails hold %d bytes, budget %d", tails.Bytes(), budget)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for j := 0; j < 400 || !written.Load(); j++ { // as long as the appends go on
				if err := readNewest(l, max(l.EndOffset()-1-int64(j%4), 0), &fromTail); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if fromTail.Load() == 0 {
		t.Error("the tails answered no read")
	}
}

// readNewest reads l at off and, when the tail answered, checks the
// batches it gets and counts the read in fromTail.
func readNewest(l *Log, off int64, fromTail *atomic.Int64) error {
	c, err := l.Read(off, 1<<20, -1)
	if errors.Is(err, ErrOffsetOutOfRange) {
		return nil // truncated meanwhile
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if _, ok := c.(*memChunk); !ok {
		return nil
	}
	fromTail.Add(1)
	b, err := c.Bytes()
	if err != nil {
		return err
	}
	for first := true; len(b) > 0; first = false {
		h, err := recordbatch.Check(b, 0, recordbatch.CountExact)
		if err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if first && (h.BaseOffset > off || h.LastOffset() < off) {
			return fmt.Errorf("read at %d gave batch [%d, %d] first", off, h.BaseOffset, h.LastOffset())
		}
		b = b[h.Size:]
	}
	return nil
}
