package segments

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// The randomized model test drives a Log through long random sequences of
// append, roll, truncate, delete-records, retention, compaction, close and
// reopen, and crash and reopen, and after every step compares it with a
// plain in-memory model.

type mRec struct {
	off        int64
	key, value []byte
	ts         int64
}

type mBatch struct {
	base, last int64
	recs       []mRec
	raw        []byte // the stored bytes; nil once compaction rewrote the batch
}

type model struct {
	batches    []mBatch
	start, end int64
	epochs     []epochEntry
}

func (m *model) trimEpochs() {
	es := m.epochs
	for len(es) > 1 && es[1].Start <= m.start {
		es = es[1:]
	}
	if len(es) > 0 && es[0].Start < m.start {
		es[0].Start = m.start
	}
	for len(es) > 0 && es[len(es)-1].Start >= m.end {
		es = es[:len(es)-1]
	}
	m.epochs = es
}

// endForEpoch is Kafka's OffsetForLeaderEpoch answer on the model.
func (m *model) endForEpoch(epoch int32) (int32, int64) {
	es := m.epochs
	if epoch < 0 || len(es) == 0 {
		return -1, -1
	}
	if es[len(es)-1].Epoch == epoch {
		return epoch, m.end
	}
	for i, e := range es {
		if e.Epoch > epoch {
			if i == 0 {
				return epoch, e.Start
			}
			return es[i-1].Epoch, e.Start
		}
	}
	return -1, -1
}

// segOf returns the index of the segment (by bases) holding off, -1 when
// off is below them all (its segment was deleted).
func segOf(bases []int64, off int64) int {
	if off < bases[0] {
		return -1
	}
	i := 0
	for i+1 < len(bases) && bases[i+1] <= off {
		i++
	}
	return i
}

func (m *model) truncate(bases []int64, to int64) {
	if to >= m.end {
		return
	}
	if to < m.start || to < bases[0] {
		m.batches, m.start, m.end, m.epochs = nil, to, to, nil
		return
	}
	i := segOf(bases, to)
	m.end = bases[i]
	var kept []mBatch
	for _, b := range m.batches {
		if segOf(bases, b.base) > i || b.last >= to {
			continue
		}
		kept = append(kept, b)
		if segOf(bases, b.base) == i {
			m.end = b.last + 1
		}
	}
	m.batches = kept
	if m.end < m.start {
		m.batches, m.start, m.end, m.epochs = nil, to, to, nil
		return
	}
	m.trimEpochs()
}

func (m *model) compact(bases []int64, nowMs, deleteRetentionMs int64) {
	active := bases[len(bases)-1]
	latest := map[string]int64{}
	for _, b := range m.batches {
		for _, r := range b.recs {
			if r.off < active {
				latest[string(r.key)] = r.off
			}
		}
	}
	var out []mBatch
	for _, b := range m.batches {
		if b.base >= active {
			out = append(out, b)
			continue
		}
		var recs []mRec
		for _, r := range b.recs {
			if latest[string(r.key)] == r.off && (r.value != nil || r.ts >= nowMs-deleteRetentionMs) {
				recs = append(recs, r)
			}
		}
		if len(recs) == 0 {
			continue
		}
		if len(recs) != len(b.recs) {
			b.recs, b.raw = recs, nil
		}
		out = append(out, b)
	}
	m.batches = out
}

type modelRun struct {
	t       *testing.T
	rng     *rand.Rand
	mem     *vfs.MemFS
	l       *Log
	m       model
	cfg     Config
	clock   int64 // ms
	epoch   int32
	compact bool
	dir     string
}

func (r *modelRun) now() time.Time { return time.UnixMilli(r.clock) }

func (r *modelRun) open(fs vfs.FS) {
	r.l = mustOpen(r.t, r.dir, r.cfg, Options{FS: fs, Now: r.now})
}

func (r *modelRun) append() {
	n := 1 + r.rng.IntN(4)
	recs := make([]rec, n)
	for i := range recs {
		r.clock++
		recs[i] = rec{key: []byte(fmt.Sprintf("k%d", r.rng.IntN(8))), ts: r.clock}
		if !r.compact || r.rng.IntN(10) > 0 {
			recs[i].value = bytes.Repeat([]byte{byte(r.rng.Uint32())}, r.rng.IntN(80))
		}
	}
	if r.rng.IntN(20) == 0 {
		r.epoch++
	}
	b := buildBatch(recs)
	info, err := r.l.Append(b, r.epoch)
	if err != nil {
		r.t.Fatalf("append: %v", err)
	}
	if info.BaseOffset != r.m.end {
		r.t.Fatalf("append at %d, model end %d", info.BaseOffset, r.m.end)
	}
	mb := mBatch{base: r.m.end, last: r.m.end + int64(n) - 1, raw: b}
	for i, x := range recs {
		mb.recs = append(mb.recs, mRec{off: r.m.end + int64(i), key: x.key, value: x.value, ts: x.ts})
	}
	r.m.batches = append(r.m.batches, mb)
	if len(r.m.epochs) == 0 || r.epoch > r.m.epochs[len(r.m.epochs)-1].Epoch {
		r.m.epochs = append(r.m.epochs, epochEntry{Epoch: r.epoch, Start: r.m.end})
	}
	r.m.end += int64(n)
}

func (r *modelRun) step() string {
	m := &r.m
	r.clock += int64(r.rng.IntN(20))
	switch x := r.rng.IntN(100); {
	case x < 55:
		r.append()
		return "append"
	case x < 60:
		if err := r.l.Roll(); err != nil {
			r.t.Fatal(err)
		}
		return "roll"
	case x < 66:
		to := m.start + r.rng.Int64N(m.end-m.start+1)
		bases := segmentBases(r.l)
		if err := r.l.Truncate(to); err != nil {
			r.t.Fatal(err)
		}
		m.truncate(bases, to)
		return fmt.Sprintf("truncate %d", to)
	case x < 70:
		off := m.start + r.rng.Int64N(m.end-m.start+1)
		if err := r.l.DeleteRecordsBefore(off); err != nil {
			r.t.Fatal(err)
		}
		m.start = max(m.start, off)
		m.trimEpochs()
		return fmt.Sprintf("delete records before %d", off)
	case x < 80:
		if r.compact {
			bases := segmentBases(r.l)
			if err := r.l.Maintain(r.now()); err != nil {
				r.t.Fatal(err)
			}
			m.compact(bases, r.clock, r.cfg.DeleteRetentionMs)
			return "compact"
		}
		cfg := r.cfg
		cfg.RetentionBytes = r.rng.Int64N(r.l.Size() + 1)
		r.l.SetConfig(cfg)
		bases, old := segmentBases(r.l), m.start
		if err := r.l.Maintain(r.now()); err != nil {
			r.t.Fatal(err)
		}
		r.l.SetConfig(r.cfg)
		if s := r.l.StartOffset(); s != old && !slices.Contains(bases, s) {
			r.t.Fatalf("retention moved the start from %d to %d, not a segment base %v", old, s, bases)
		}
		m.start = r.l.StartOffset()
		m.trimEpochs()
		return "retention"
	case x < 81:
		off := m.end + r.rng.Int64N(100)
		if err := r.l.Reset(off); err != nil {
			r.t.Fatal(err)
		}
		m.batches, m.start, m.end, m.epochs = nil, off, off, nil
		return fmt.Sprintf("reset %d", off)
	case x < 85:
		if err := r.l.Close(); err != nil {
			r.t.Fatal(err)
		}
		r.open(r.mem)
		return "reopen"
	case x < 90:
		// CloseAll: a clean close, or none at all when the tail past the
		// saved recovery point is within RescanBytes; then a reopen, or a
		// power cut first.
		h, err := r.mem.OpenFSSync("/m")
		if err != nil {
			r.t.Fatal(err)
		}
		if err := CloseAll(h, []Closing{{Log: r.l}}, 1); err != nil {
			r.t.Fatal(err)
		}
		h.Close()
		if x < 88 {
			r.open(r.mem)
			return "reopen after CloseAll"
		}
		r.mem = r.mem.Crash(nil)
		r.open(r.mem)
		return "crash after CloseAll"
	default:
		// Power cut: every acknowledged append was fsynced (flush.messages=1).
		r.mem = r.mem.Crash(nil)
		r.open(r.mem)
		return "crash"
	}
}

func (r *modelRun) check(op string) {
	t, l, m := r.t, r.l, &r.m
	t.Helper()
	if l.EndOffset() != m.end || l.StartOffset() != m.start {
		t.Fatalf("after %s: offsets [%d, %d), model [%d, %d)", op, l.StartOffset(), l.EndOffset(), m.start, m.end)
	}
	var want []mBatch
	for _, b := range m.batches {
		if b.last >= m.start {
			want = append(want, b)
		}
	}
	for off := m.start; off < m.end; {
		c, err := l.Read(off, 2048, -1)
		if err != nil {
			t.Fatalf("after %s: read %d: %v", op, off, err)
		}
		b, err := c.Bytes()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, err := recordbatch.Check(b, 0, recordbatch.CountCompacted)
			if err != nil {
				t.Fatalf("after %s: bad batch read at %d: %v", op, off, err)
			}
			if len(want) == 0 {
				t.Fatalf("after %s: unexpected batch at %d", op, h.BaseOffset)
			}
			w := want[0]
			want = want[1:]
			if h.BaseOffset != w.base || h.LastOffset() != w.last {
				t.Fatalf("after %s: batch [%d, %d], model [%d, %d]", op, h.BaseOffset, h.LastOffset(), w.base, w.last)
			}
			if w.raw != nil && !bytes.Equal(b[:h.Size], w.raw) {
				t.Fatalf("after %s: batch %d bytes differ", op, w.base)
			}
			var got []mRec
			err = recordbatch.ForEachRecord(h, b[:h.Size], func(x recordbatch.RawRecord) bool {
				// The record's bytes are the decoder's: keep copies.
				got = append(got, mRec{off: x.Offset, key: bytes.Clone(x.Key), value: bytes.Clone(x.Value), ts: x.Timestamp})
				return true
			})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(w.recs) {
				t.Fatalf("after %s: batch %d records %v, model %v (%v)", op, w.base, got, w.recs, err)
			}
			off = h.NextOffset()
			b = b[h.Size:]
		}
	}
	if len(want) > 0 {
		t.Fatalf("after %s: %d model batches not read, first %d", op, len(want), want[0].base)
	}
	for e := int32(-1); e <= r.epoch+1; e++ {
		ge, go_, _ := l.EndOffsetForEpoch(e)
		if we, wo := m.endForEpoch(e); ge != we || go_ != wo {
			t.Fatalf("after %s: epoch %d ends %d/%d, model %d/%d (epochs %v)", op, e, ge, go_, we, wo, m.epochs)
		}
	}
	ts := r.clock - r.rng.Int64N(300)
	off, at, ok, err := l.OffsetForTimestamp(ts)
	var wOff, wAt int64
	wOk := false
	for _, b := range m.batches {
		for _, x := range b.recs {
			if !wOk && x.off >= m.start && x.ts >= ts {
				wOff, wAt, wOk = x.off, x.ts, true
			}
		}
	}
	if err != nil || ok != wOk || (ok && (off != wOff || at != wAt)) {

		t.Fatalf("after %s: timestamp %d -> %d@%d %v %v, model %d@%d %v", op, ts, off, at, ok, err, wOff, wAt, wOk)
	}
}

func TestModel(t *testing.T) {
	steps, seeds := 600, uint64(3)
	if testing.Short() {
		steps = 150
	}
	if os.Getenv("RUNNEL_CHAOS") != "" {
		seeds = 50
	}
	for _, compact := range []bool{false, true} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("compact=%v/seed=%d", compact, seed), func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.SegmentBytes = 1200
				cfg.IndexIntervalBytes = 150
				cfg.FlushMessages = 1
				cfg.RetentionMs = -1
				cfg.DeleteRetentionMs = 100
				cfg.RescanBytes = 600 // half a segment: CloseAll closes some clean, leaves some to rescan
				if compact {
					cfg.CleanupPolicy = "compact"
				}
				r := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, 99)), mem: vfs.NewMemFS(), cfg: cfg, clock: 1_000_000, compact: compact, dir: "/m/p"}
				r.open(r.mem)
				var ops []string
				for i := 0; i < steps; i++ {
					op := r.step()
					ops = append(ops, op)
					if len(ops) > 8 {
						ops = ops[1:]
					}
					r.check(fmt.Sprint(ops))
					if i%20 == 0 || strings.Contains(op, "reopen") || strings.Contains(op, "crash") {
						checkIndexes(t, r.l)
					}
				}
				r.l.Close()
			})
		}
	}
}
