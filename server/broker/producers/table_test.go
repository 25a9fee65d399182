package producers

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
)

// Idle producers expire, and the table never holds more than MaxIDs.
func TestProducerTableBounded(t *testing.T) {
	policy := &Policy{Expiration: time.Hour, MaxIDs: 100}
	tbl := NewTable(policy)
	now := time.Now()
	for pid := range int64(10_000) {
		tbl.Record(Batch{ProducerID: pid, Records: []byte("x")}, pid, now.UnixMilli()+pid, now)
		if tbl.Len() > policy.MaxIDs {
			t.Fatalf("%d ids held, max %d", tbl.Len(), policy.MaxIDs)
		}
	}
	if _, ok := tbl.lookup(9_999, now); !ok {
		t.Fatal("the most recent producer was dropped")
	}
	if _, ok := tbl.lookup(0, now); ok {
		t.Fatal("the longest idle producer was kept")
	}
	// An hour later every one of them has expired.
	later := now.Add(2 * time.Hour)
	if _, ok := tbl.lookup(9_999, later); ok {
		t.Fatal("an idle producer outlived producer.id.expiration")
	}
	tbl.Record(Batch{ProducerID: 1}, 1, later.UnixMilli(), later)
	if tbl.Len() != 1 {
		t.Fatalf("%d ids after expiry, want 1", tbl.Len())
	}
}

// The table's decisions on one producer: the next sequence is taken, a
// retry of a kept batch with the same records is a duplicate at its
// offsets, other records under its sequences or a gap are out of order,
// an older epoch is fenced, and a newer one must start at sequence 0.
func TestProducerTableCheck(t *testing.T) {
	tbl := NewTable(&Policy{Expiration: time.Hour, MaxIDs: 10})
	now := time.Now()
	b := func(epoch int16, seq int32, recs string) Batch {
		return Batch{ProducerID: 7, Epoch: epoch, FirstSeq: seq, LastDelta: 1, Records: []byte(recs)}
	}
	tbl.Record(b(1, 0, "a"), 10, now.UnixMilli(), now)
	for _, c := range []struct {
		name string
		b    Batch
		dup  bool
		err  error
	}{
		{name: "next", b: b(1, 2, "b")},
		{name: "retry", b: b(1, 0, "a"), dup: true},
		{name: "other records", b: b(1, 0, "z"), err: ErrOutOfOrderSequence},
		{name: "gap", b: b(1, 5, "b"), err: ErrOutOfOrderSequence},
		{name: "old epoch", b: b(0, 2, "b"), err: ErrInvalidProducerEpoch},
		{name: "new epoch", b: b(2, 0, "b")},
		{name: "new epoch mid-sequence", b: b(2, 3, "b"), err: ErrOutOfOrderSequence},
	} {
		base, last, dup, err := tbl.Check(c.b, now)
		if dup != c.dup || !errors.Is(err, c.err) || (dup && (base != 10 || last != 11)) {
			t.Errorf("%s: %d-%d dup %v err %v", c.name, base, last, dup, err)
		}
	}
}

// A marker from a fenced producer epoch or an older coordinator is refused.
func TestProducerTableMarkerFencing(t *testing.T) {
	tbl := NewTable(&Policy{Expiration: time.Hour, MaxIDs: 10})
	now := time.Now()
	tbl.Marker(recordbatch.Marker{ProducerID: 3, ProducerEpoch: 2, CoordinatorEpoch: 5}, now.UnixMilli(), now)
	if err := tbl.CheckMarker(recordbatch.Marker{ProducerID: 3, ProducerEpoch: 1, CoordinatorEpoch: 5}, now); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Errorf("older producer epoch: %v", err)
	}
	if err := tbl.CheckMarker(recordbatch.Marker{ProducerID: 3, ProducerEpoch: 2, CoordinatorEpoch: 4}, now); !errors.Is(err, ErrCoordinatorFenced) {
		t.Errorf("older coordinator epoch: %v", err)
	}
	if err := tbl.CheckMarker(recordbatch.Marker{ProducerID: 3, ProducerEpoch: 2, CoordinatorEpoch: 5}, now); err != nil {
		t.Errorf("same epochs: %v", err)
	}
}

// heapAfter is the live heap after fn, with its result kept alive.
func heapAfter(fn func() any) (uint64, any) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keep := fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc), keep
}

// A flood of producer ids costs the bounded table a fixed amount of
// memory; the same flood into an unbounded table (the baseline, measured
// in the same run) grows with every id.
func TestProducerTableMemoryBounded(t *testing.T) {
	const ids = 200_000
	flood := func(maxIDs int) func() any {
		return func() any {
			tbl := NewTable(&Policy{Expiration: time.Hour, MaxIDs: maxIDs})
			now := time.Now()
			for pid := range int64(ids) {
				tbl.Record(Batch{ProducerID: pid, Records: []byte("x")}, pid, now.UnixMilli(), now)
			}
			return tbl
		}
	}
	unbounded, keep1 := heapAfter(flood(ids + 1))
	bounded, keep2 := heapAfter(flood(DefaultMaxIDsPerPartition))
	runtime.KeepAlive(keep1)
	runtime.KeepAlive(keep2)
	t.Logf("%d producer ids: unbounded table %d KiB (%d B/id), bounded table %d KiB; ratio %.1fx",
		ids, unbounded>>10, unbounded/ids, bounded>>10, float64(unbounded)/float64(max(bounded, 1)))
	if bounded*5 > unbounded {
		t.Fatalf("bounded table holds %d bytes, unbounded %d: not bounded", bounded, unbounded)
	}
}

// Equal tells tables apart by what Check and CheckMarker answer, and
// ignores producers that expired.
func TestProducerTableEqual(t *testing.T) {
	policy := &Policy{Expiration: time.Hour, MaxIDs: 10}
	now := time.Now()
	at := now.UnixMilli()
	base := func() *Table {
		tbl := NewTable(policy)
		tbl.Record(Batch{ProducerID: 1, Epoch: 2, FirstSeq: 0, Records: []byte("a")}, 0, at, now)
		tbl.Marker(recordbatch.Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 3}, at, now)
		return tbl
	}
	if !base().Equal(base(), now) {
		t.Fatal("equal tables differ")
	}
	old := base()
	old.Record(Batch{ProducerID: 9, Records: []byte("x")}, 5, now.Add(-2*time.Hour).UnixMilli(), now)
	if !old.Equal(base(), now) || !base().Equal(old, now) {
		t.Fatal("an expired producer makes tables differ")
	}
	for name, change := range map[string]func(*Table){
		"another producer": func(x *Table) { x.Record(Batch{ProducerID: 2, Records: []byte("b")}, 1, at, now) },
		"a newer epoch":    func(x *Table) { x.Record(Batch{ProducerID: 1, Epoch: 3, Records: []byte("b")}, 1, at, now) },
		"another batch": func(x *Table) {
			x.Record(Batch{ProducerID: 1, Epoch: 2, FirstSeq: 1, Records: []byte("b")}, 1, at, now)
		},
		"other records": func(x *Table) { x.ids.byID[1].batches[0].sum++ },
		"a later write": func(x *Table) { x.ids.byID[1].lastWrite++ },
		"a newer coordinator": func(x *Table) {
			x.Marker(recordbatch.Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 4}, at, now)
		},
	} {
		changed := base()
		change(changed)
		if changed.Equal(base(), now) || base().Equal(changed, now) {
			t.Errorf("tables equal despite %s", name)
		}
	}
}

// A producer writing on keeps its last batchesKept batches without a new
// array every few writes (issue 19), and the duplicates it answers are
// still those of its last batchesKept batches.
func TestProducerTableSteadyWritesAllocateNothing(t *testing.T) {
	tbl := NewTable(&Policy{Expiration: time.Hour, MaxIDs: 10})
	now := time.Now()
	seq := int32(0)
	recs := []byte("x") // a request's bytes, allocated before the write
	write := func() {
		tbl.Record(Batch{ProducerID: 7, FirstSeq: seq, Records: recs}, int64(seq), now.UnixMilli(), now)
		seq++
	}
	for range batchesKept {
		write()
	}
	hundred := func() {
		for range 100 {
			write()
		}
	}
	if allocs := testing.AllocsPerRun(1, hundred); allocs != 0 { // a count, not an average rounded down
		t.Fatalf("%v allocations in 100 writes, want 0", allocs)
	}
	for s := seq - batchesKept; s < seq; s++ {
		base, _, dup, err := tbl.Check(Batch{ProducerID: 7, FirstSeq: s, Records: []byte("x")}, now)
		if err != nil || !dup || base != int64(s) {
			t.Fatalf("retry of kept batch %d: base %d, dup %v, err %v", s, base, dup, err)
		}
	}
	if _, _, _, err := tbl.Check(Batch{ProducerID: 7, FirstSeq: seq - batchesKept - 1, Records: []byte("x")}, now); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry of a batch no longer kept: %v, want out of order", err)
	}
}
