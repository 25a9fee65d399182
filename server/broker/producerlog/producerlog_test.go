package producerlog

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/producers"
)

func openLog(t *testing.T) *segments.Log {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return log
}

// appendBatch builds a batch of values at ts, with producer fields when
// pid >= 0, and appends it; it returns its base offset.
func appendBatch(t *testing.T, log *segments.Log, pid int64, epoch int16, seq int32, ts int64, values ...string) int64 {
	t.Helper()
	var recs []recordbatch.NewRecord
	for _, v := range values {
		recs = append(recs, recordbatch.NewRecord{Timestamp: ts, Value: []byte(v)})
	}
	b := recordbatch.Build(recs)
	if pid >= 0 {
		recordbatch.SetProducer(b, pid, epoch, seq)
	}
	return appendRaw(t, log, b)
}

func appendRaw(t *testing.T, log *segments.Log, b []byte) int64 {
	t.Helper()
	info, err := log.Append(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return info.BaseOffset
}

func key(name, body string) producers.Key {
	return producers.NewKey("", name, sha256.Sum256([]byte(body)))
}

func appendKeyed(t *testing.T, log *segments.Log, k producers.Key, ts int64, values ...string) int64 {
	t.Helper()
	var recs []recordbatch.NewRecord
	for _, v := range values {
		recs = append(recs, recordbatch.NewRecord{Timestamp: ts, Value: []byte(v)})
	}
	b := recordbatch.Build(recs)
	recordbatch.SetProducer(b, k.ID, k.Epoch(), k.Seq())
	return appendRaw(t, log, b)
}

// Scan starts at the first batch at or after since (and at or after from),
// stops below end, and reads a log larger than one read's worth.
func TestScanBounds(t *testing.T) {
	log := openLog(t)
	big := strings.Repeat("x", 300<<10) // 5 of them are more than one read
	for i := range 5 {
		appendBatch(t, log, -1, 0, 0, int64(1000*(i+1)), big, "small")
	}
	scan := func(since time.Time, from, end int64) []int64 {
		t.Helper()
		var bases []int64
		if err := Scan(log, since, from, end, func(_ []byte, info recordbatch.Info) { bases = append(bases, info.BaseOffset) }); err != nil {
			t.Fatal(err)
		}
		return bases
	}
	if got := scan(time.UnixMilli(0), 0, log.EndOffset()); !slices.Equal(got, []int64{0, 2, 4, 6, 8}) {
		t.Fatalf("whole log: %v", got)
	}
	if got := scan(time.UnixMilli(2500), 0, log.EndOffset()); !slices.Equal(got, []int64{4, 6, 8}) {
		t.Fatalf("since 2500 ms: %v, want the batches of 3000 ms on", got)
	}
	if got := scan(time.UnixMilli(0), 6, 8); !slices.Equal(got, []int64{6}) {
		t.Fatalf("from 6 below 8: %v, want the batch at 6 alone", got)
	}
	if got := scan(time.UnixMilli(0), 5, 8); !slices.Equal(got, []int64{4, 6}) {
		t.Fatalf("from 5 below 8: %v, want the batch holding 5 whole, then 6", got)
	}
	if got := scan(time.UnixMilli(9000), 0, log.EndOffset()); got != nil {
		t.Fatalf("since after the last batch: %v", got)
	}
}

// LoadTable rebuilds the producer table from the batches younger than the
// expiration: a retried batch is a duplicate with its original offsets,
// the last marker's coordinator epoch fences an older one, and neither an
// expired producer nor an idempotency key's id is in it.
func TestLoadTable(t *testing.T) {
	log := openLog(t)
	now := time.Now()
	ms := now.UnixMilli()
	appendBatch(t, log, 9, 0, 0, now.Add(-2*time.Hour).UnixMilli(), "expired")
	appendBatch(t, log, 7, 1, 0, ms, "a", "b")
	second := appendBatch(t, log, 7, 1, 2, ms, "c")
	appendKeyed(t, log, key("k", "body"), ms, "keyed")
	appendRaw(t, log, recordbatch.BuildControl(recordbatch.Marker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 3, Type: recordbatch.ControlCommit}, ms))

	policy := &producers.Policy{Expiration: time.Hour, MaxIDs: 10}
	tbl, err := LoadTable(log, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	retry := recordbatch.Build([]recordbatch.NewRecord{{Timestamp: ms, Value: []byte("c")}})
	base, last, dup, err := tbl.Check(producers.Batch{ProducerID: 7, Epoch: 1, FirstSeq: 2, Records: retry[recordbatch.HeaderLen:]}, now)
	if err != nil || !dup || base != second || last != second {
		t.Fatalf("retry of the second batch: %d-%d dup %v %v; want a duplicate at %d", base, last, dup, err, second)
	}
	err = tbl.CheckMarker(recordbatch.Marker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 2, Type: recordbatch.ControlAbort}, now)
	if !errors.Is(err, producers.ErrCoordinatorFenced) {
		t.Fatalf("a marker from coordinator epoch 2 after 3: %v, want fenced", err)
	}
	got := tbl.Producers()
	if len(got) != 1 || got[0].ID != 7 || got[0].CoordinatorEpoch != 3 || got[0].LastSequence != 2 {
		t.Fatalf("producers %+v, want 7 alone (last sequence 2, coordinator epoch 3)", got)
	}
}

// Keys.Load rebuilds the key index, reading batches appended during its
// unlocked read under the lock; when the log changes under the read (a
// truncation and Reset, as a follower's does) the index is read again, so
// a key whose batch was cut is no duplicate.
func TestKeysLoad(t *testing.T) {
	log := openLog(t)
	now := time.Now()
	ms := now.UnixMilli()
	kept, cut, late := key("kept", "b"), key("cut", "b"), key("late", "b")
	keptAt := appendKeyed(t, log, kept, ms, "v1", "v2")
	cutAt := appendKeyed(t, log, cut, ms, "v")
	policy := &producers.KeyPolicy{Expiration: time.Hour, MaxKeys: 100}

	var mu sync.Mutex
	var k Keys
	hooked := &hookLog{Log: log, once: func() { appendKeyed(t, log, late, ms, "v") }}
	if err := k.Load(&mu, hooked, policy, now); err != nil {
		t.Fatal(err)
	}
	check := func(key producers.Key, count int32) (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		base, _, dup, err := k.Check(key, count, now)
		if err != nil {
			t.Fatal(err)
		}
		return base, dup
	}
	if base, dup := check(kept, 2); !dup || base != keptAt {
		t.Fatalf("kept key: %d %v, want a duplicate at %d", base, dup, keptAt)
	}
	if _, dup := check(late, 1); !dup {
		t.Fatal("a key appended during the unlocked read is missing")
	}

	mu.Lock()
	k.Reset()
	mu.Unlock()
	hooked = &hookLog{Log: log, once: func() {
		mu.Lock()
		defer mu.Unlock()
		if err := log.Truncate(cutAt); err != nil {
			t.Error(err)
		}
		k.Reset()
	}}
	if err := k.Load(&mu, hooked, policy, now); err != nil {
		t.Fatal(err)
	}
	if _, dup := check(cut, 1); dup {
		t.Fatal("a key whose batch was truncated during the read answers as a duplicate")
	}
	if _, dup := check(kept, 2); !dup {
		t.Fatal("the kept key is missing after the reread")
	}
}

// hookLog runs once after the bytes of its first read (Load's unlocked
// one) are in memory.
type hookLog struct {
	*segments.Log
	once func()
	done bool
}

func (h *hookLog) Read(offset int64, maxBytes int, maxOffset int64) (segments.Chunk, error) {
	c, err := h.Log.Read(offset, maxBytes, maxOffset)
	if err != nil || h.done {
		return c, err
	}
	h.done = true
	return hookChunk{c, h.once}, nil
}

type hookChunk struct {
	segments.Chunk
	after func()
}

func (c hookChunk) Bytes() ([]byte, error) {
	b, err := c.Chunk.Bytes()
	c.after()
	return b, err
}

// Active lists the table's producers with their open transactions' first
// offsets, and the log's open transactions of producers the table does not
// hold, sorted by id.
func TestActive(t *testing.T) {
	held := []producers.Producer{{ID: 3, Epoch: 1, LastSequence: 4, LastTimestamp: 100, CoordinatorEpoch: 2},
		{ID: 1, Epoch: 0, LastSequence: 0, LastTimestamp: 50, CoordinatorEpoch: -1}}
	open := []segments.OngoingTxn{{ProducerID: 3, ProducerEpoch: 1, FirstOffset: 10}, {ProducerID: 2, ProducerEpoch: 5, FirstOffset: 5}}
	want := []kafkaproto.ActiveProducer{
		{ID: 1, Epoch: 0, LastSequence: 0, LastTimestamp: 50, CoordinatorEpoch: -1, TxnStartOffset: -1},
		{ID: 2, Epoch: 5, LastSequence: -1, LastTimestamp: -1, CoordinatorEpoch: -1, TxnStartOffset: 5},
		{ID: 3, Epoch: 1, LastSequence: 4, LastTimestamp: 100, CoordinatorEpoch: 2, TxnStartOffset: 10},
	}
	if got := Active(held, open); !slices.Equal(got, want) {
		t.Fatalf("Active:\n got %+v\nwant %+v", got, want)
	}
	if got := Active(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("Active of nothing: %#v, want an empty list", got)
	}
}

// Table.Load reads the log without the append lock, then what was
// appended meanwhile under it; a truncation and Reset during the read has
// it read again (the load Keys shares, kept.go).
func TestTableLoad(t *testing.T) {
	log := openLog(t)
	now := time.Now()
	ms := now.UnixMilli()
	policy := &producers.Policy{Expiration: time.Hour, MaxIDs: 100}
	firstAt := appendBatch(t, log, 4, 0, 0, ms, "a")
	cutAt := appendBatch(t, log, 4, 0, 1, ms, "b")
	var mu sync.Mutex
	var tbl Table
	check := func(seq int32, value string) (int64, bool) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		raw := recordbatch.Build([]recordbatch.NewRecord{{Timestamp: ms, Value: []byte(value)}})
		base, _, dup, err := tbl.Get().Check(producers.Batch{ProducerID: 4, FirstSeq: seq, Records: raw[recordbatch.HeaderLen:]}, now)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		return base, dup
	}
	hooked := &hookLog{Log: log, once: func() { appendBatch(t, log, 4, 0, 2, ms, "c") }}
	if err := tbl.Load(&mu, hooked, policy, now); err != nil {
		t.Fatal(err)
	}
	if _, dup := check(2, "c"); !dup {
		t.Fatal("a batch appended during the unlocked read is missing")
	}
	mu.Lock()
	tbl.Reset()
	mu.Unlock()
	hooked = &hookLog{Log: log, once: func() {
		mu.Lock()
		defer mu.Unlock()
		if err := log.Truncate(cutAt); err != nil {
			t.Error(err)
		}
		tbl.Reset()
	}}
	if err := tbl.Load(&mu, hooked, policy, now); err != nil {
		t.Fatal(err)
	}
	if base, dup := check(0, "a"); !dup || base != firstAt {
		t.Fatalf("kept batch: %d %v, want a duplicate at %d", base, dup, firstAt)
	}
	if _, dup := check(1, "b"); dup {
		t.Fatal("a batch truncated during the read answers as a duplicate")
	}
}

// A loaded table and key index answer Load and LoadLocked without
// allocating: every idempotent or keyed write asks them, twice, and the
// rebuild's rule made each time was 4 of a produce's ~12 allocations per
// partition (issue 19).
func TestLoadedAllocatesNothing(t *testing.T) {
	log := openLog(t)
	appendBatch(t, log, 3, 0, 0, time.Now().UnixMilli(), "a")
	var mu sync.Mutex
	var table Table
	var keys Keys
	now := time.Now()
	if err := table.Load(&mu, log, producers.DefaultPolicy, now); err != nil {
		t.Fatal(err)
	}
	if err := keys.Load(&mu, log, producers.DefaultKeyPolicy, now); err != nil {
		t.Fatal(err)
	}
	if !table.Loaded() || !keys.Loaded() {
		t.Fatal("not loaded")
	}
	allocs := testing.AllocsPerRun(100, func() {
		_ = table.Load(&mu, log, producers.DefaultPolicy, now)
		_ = table.LoadLocked(log, producers.DefaultPolicy, now)
		_ = keys.Load(&mu, log, producers.DefaultKeyPolicy, now)
		_ = keys.LoadLocked(log, producers.DefaultKeyPolicy, now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a round of loaded loads, want 0", allocs)
	}
}
