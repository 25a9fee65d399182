package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
	"github.com/runnel/runnel/server/broker/producerlog"
	"github.com/runnel/runnel/server/broker/producers"
)

// A follower keeps its producer table as it copies the leader's batches
// (issue 19): the replica that leads next checks duplicates and sequences
// from memory at once, where it used to read its log back (LoadTable,
// under appendMu) on its first idempotent write, which held up every
// produce to the partitions it had just taken over.

// countReads counts the reads of the files of an ErrorFS.
type countReads struct{ n atomic.Int64 }

func (c *countReads) inject(op vfs.Op, _ string) error {
	if op == vfs.OpRead {
		c.n.Add(1)
	}
	return nil
}

// followerOn is a partition on fs followed by this broker (id 0) from
// broker 1 at leader epoch 0.
func followerOn(t *testing.T, fs vfs.FS) *Partition {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	setLeader(p, 1, 0)
	t.Cleanup(func() { p.close() })
	return p
}

// copyFrom appends to follower what leader holds past the follower's end,
// as the replica fetcher does.
func copyFrom(t *testing.T, leader, follower *Partition) {
	t.Helper()
	from := follower.log().EndOffset()
	if from == leader.log().EndOffset() {
		return
	}
	c, err := leader.log().Read(from, 1<<20, leader.log().EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.Bytes()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.appendAsFollower(data, follower.leaderEpoch.Load()); err != nil {
		t.Fatal(err)
	}
}

// A follower that becomes leader answers a retry of a batch the old leader
// acknowledged as the duplicate it is, refuses a sequence gap and a fenced
// epoch, and takes the next batch, all without reading its log.
func TestNewLeaderKnowsProducersWithoutReadingLog(t *testing.T) {
	old := leaderPartition(t)
	counts := &countReads{}
	efs := vfs.NewErrorFS(vfs.OSFS(), counts.inject)
	next := followerOn(t, efs)
	now := time.Now().UnixMilli()
	var acked []AppendResult
	for seq := range int32(3) {
		res, err := old.append(idemBatch(t, 7, 1, seq, string(rune('a'+seq)), now))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, res)
		copyFrom(t, old, next) // one fetch per batch, as a caught-up follower
	}
	m := recordbatch.Marker{ProducerID: 9, ProducerEpoch: 3, CoordinatorEpoch: 2, Type: recordbatch.ControlAbort}
	if _, err := old.append(txnDataBatch(t, 9, 3, 0, "txn")); err != nil {
		t.Fatal(err)
	}
	_, wait, err := old.appendMarker(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	copyFrom(t, old, next)

	setLeader(next, 0, 1) // the old leader's broker died: this replica leads
	next.repl.isr = []int32{0}
	counts.n.Store(0)
	res, err := next.append(idemBatch(t, 7, 1, 2, "c", now))
	if err != nil || !res.Duplicate || res.BaseOffset != acked[2].BaseOffset {
		t.Fatalf("retry of the acknowledged batch on the new leader: %+v %v, want the duplicate at %d", res, err, acked[2].BaseOffset)
	}
	if reads := counts.n.Load(); reads != 0 {
		t.Fatalf("the new leader read its log %d times to check its first idempotent write", reads)
	}
	if _, err := next.append(idemBatch(t, 7, 1, 4, "e", now)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap on the new leader: %v, want out of order", err)
	}
	if _, err := next.append(idemBatch(t, 7, 0, 3, "old", now)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch on the new leader: %v, want invalid producer epoch", err)
	}
	if _, _, err := next.appendMarker(recordbatch.Marker{ProducerID: 9, ProducerEpoch: 3, CoordinatorEpoch: 1, Type: recordbatch.ControlCommit}); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator on the new leader: %v, want fenced", err)
	}
	res, err = next.append(idemBatch(t, 7, 1, 3, "d", now))
	if err != nil || res.Duplicate || res.BaseOffset != old.log().EndOffset() {
		t.Fatalf("next batch on the new leader: %+v %v", res, err)
	}
	if reads := counts.n.Load(); reads != 0 {
		t.Fatalf("the new leader read its log %d times checking its producers", reads)
	}
}

// followModel drives a follower with random batches from its leader
// (plain, idempotent, transactional, markers, HTTP-keyed), truncations and
// resets, and checks after each step that the producer table and the key
// index it holds are the ones a rebuild from its log makes, and that a
// follower whose log was empty since its last truncation holds them.
type followModel struct {
	t      *testing.T
	rng    *rand.Rand
	p      *Partition
	policy *producers.Policy
	now    time.Time
	epoch  int32           // the leader epoch of the next batches
	seq    map[int64]int32 // next sequence per producer id
	pepoch map[int64]int16 // producer epoch per producer id
	known  bool            // the log was empty since its last truncation
	checks int             // comparisons made
}

func (m *followModel) batch() []byte {
	r := m.rng
	ts := m.now.Add(time.Duration(r.Int63n(int64(150*time.Minute))) - 2*time.Hour).UnixMilli() // 2h ago .. 30 min ahead
	var recs []recordbatch.NewRecord
	for i := range 1 + r.Intn(3) {
		recs = append(recs, recordbatch.NewRecord{Timestamp: ts, Value: fmt.Appendf(nil, "v%d-%d", r.Intn(4), i)})
	}
	pid := int64(1 + r.Intn(6))
	switch k := r.Intn(10); {
	case k < 2: // plain
		return recordbatch.Build(recs)
	case k < 3: // a marker, from a coordinator epoch that may go back
		if r.Intn(3) == 0 {
			m.pepoch[pid]++
			m.seq[pid] = 0
		}
		typ := recordbatch.ControlCommit
		if r.Intn(2) == 0 {
			typ = recordbatch.ControlAbort
		}
		return recordbatch.BuildControl(recordbatch.Marker{ProducerID: pid, ProducerEpoch: m.pepoch[pid],
			CoordinatorEpoch: int32(r.Intn(4)), Type: typ}, ts)
	case k < 4: // HTTP-keyed
		kk := producers.NewKey("", fmt.Sprint("key-", r.Intn(5)), sha256.Sum256([]byte{byte(r.Intn(2))}))
		b := recordbatch.Build(recs)
		recordbatch.SetProducer(b, kk.ID, kk.Epoch(), kk.Seq())
		return b
	default: // idempotent, transactional now and then, in sequence or not
		b := recordbatch.Build(recs)
		seq := m.seq[pid]
		if r.Intn(8) == 0 {
			seq = int32(r.Intn(10))
		}
		if r.Intn(12) == 0 {
			m.pepoch[pid]++
			seq = 0
		}
		recordbatch.SetProducer(b, pid, m.pepoch[pid], seq)
		if r.Intn(3) == 0 {
			b[recordbatch.AttrAt+1] |= recordbatch.AttrTransactional
			recordbatch.SetCRC(b)
		}
		m.seq[pid] = seq + int32(len(recs))
		return b
	}
}

func (m *followModel) appendBatches() {
	if m.rng.Intn(6) == 0 {
		m.epoch++
		follow(m.p, 1, m.epoch)
	}
	var data []byte
	off := m.p.log().EndOffset()
	for range 1 + m.rng.Intn(3) {
		b := m.batch()
		recordbatch.SetBaseOffset(b, off)
		recordbatch.SetEpoch(b, m.epoch)
		off += int64(recordbatch.ParseHeader(b).LastOffsetDelta) + 1
		data = append(data, b...)
	}
	wasEmpty := m.p.log().StartOffset() == m.p.log().EndOffset()
	if err := m.p.appendAsFollower(data, m.epoch); err != nil {
		m.t.Fatal(err)
	}
	m.known = m.known || wasEmpty
}

func (m *followModel) truncate() {
	start, end := m.p.log().StartOffset(), m.p.log().EndOffset()
	if end == start {
		return
	}
	cut := start + m.rng.Int63n(end-start)
	if err := m.p.truncateAsFollower(cut, m.epoch); err != nil {
		m.t.Fatal(err)
	}
	m.known = cut == start
}

func (m *followModel) reset() {
	if err := m.p.resetAsFollower(m.p.log().EndOffset()+int64(m.rng.Intn(5)), m.epoch); err != nil {
		m.t.Fatal(err)
	}
	m.known = true
}

func (m *followModel) rebuild() {
	if err := m.p.producers.Load(&m.p.appendMu, m.p.log(), m.policy, m.now); err != nil {
		m.t.Fatal(err)
	}
	if err := m.p.loadKeys(m.now); err != nil {
		m.t.Fatal(err)
	}
	m.known = true
}

// check compares what the follower holds with a rebuild from its log.
func (m *followModel) check(step int, op string) {
	m.t.Helper()
	p := m.p
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	held := p.producers.Get()
	if m.known && (held == nil || !p.keys.Loaded()) {
		m.t.Fatalf("step %d (%s): the follower's log was empty since its last truncation, but it holds no producer table (%v) or key index (%v)",
			step, op, held != nil, p.keys.Loaded())
	}
	if held != nil {
		want, err := producerlog.LoadTable(p.log(), m.policy, m.now)
		if err != nil {
			m.t.Fatal(err)
		}
		if !held.Equal(want, m.now) {
			m.t.Fatalf("step %d (%s): follower's producers\n%+v\nrebuilt from its log\n%+v", step, op, held.Producers(), want.Producers())
		}
		m.checks++
	}
	if p.keys.Loaded() {
		var want producerlog.Keys
		if err := want.LoadLocked(p.log(), p.keyPolicy(), m.now); err != nil {
			m.t.Fatal(err)
		}
		if !p.keys.Equal(&want, m.now) {
			m.t.Fatalf("step %d (%s): follower's key index differs from the one rebuilt from its log", step, op)
		}
	}
}

// The incrementally kept table equals LoadTable after random follower
// appends, truncations, resets and rebuilds.
func TestFollowerProducersMatchRebuild(t *testing.T) {
	for seed := range int64(10) {
		m := &followModel{t: t, rng: rand.New(rand.NewSource(seed)),
			policy: &producers.Policy{Expiration: time.Hour, MaxIDs: 4},
			now:    time.Now(), seq: map[int64]int32{}, pepoch: map[int64]int16{}}
		m.p = testPartition(t, m.policy)
		m.p.now = func() time.Time { return m.now }
		m.p.repl.self = 0
		follow(m.p, 1, 0)
		for step := range 150 {
			op := "append"
			switch k := m.rng.Intn(20); {
			case k == 0:
				op = "truncate"
				m.truncate()
			case k == 1:
				op = "reset"
				m.reset()
			case k == 2:
				op = "rebuild" // in the background, as after a restart or truncation
				m.rebuild()
			default:
				m.appendBatches()
			}
			m.check(step, op)
		}
		if m.checks == 0 {
			t.Fatalf("seed %d: no table to compare", seed)
		}
	}
}

// A follower whose log holds batches its table never saw (opened after a
// restart) rebuilds the table in the background once it appends again in
// the ISR, so that it checks its producers without reading its log when
// it leads.
func TestFollowerRebuildsProducersInBackground(t *testing.T) {
	old := leaderPartition(t)
	counts := &countReads{}
	next := followerOn(t, vfs.NewErrorFS(vfs.OSFS(), counts.inject))
	now := time.Now().UnixMilli()
	first, err := old.append(idemBatch(t, 7, 0, 0, "a", now))
	if err != nil {
		t.Fatal(err)
	}
	copyFrom(t, old, next)
	next.appendMu.Lock()
	next.forgetProducersLocked() // as a restart leaves it
	next.appendMu.Unlock()
	if !next.producersUnknown() {
		t.Fatal("a follower whose table was dropped on a log holding batches does not know it")
	}
	second, err := old.append(idemBatch(t, 7, 0, 1, "b", now))
	if err != nil {
		t.Fatal(err)
	}
	copyFrom(t, old, next)
	m := testFetchManager(t, 0)
	next.repl.isr = []int32{1} // catching up: it cannot be elected, its rebuild waits
	m.rebuilds.after(next)
	m.rebuilds.mu.Lock()
	queued := len(m.rebuilds.queued)
	m.rebuilds.mu.Unlock()
	if queued != 0 {
		t.Fatal("a rebuild was queued for a follower out of the ISR")
	}
	next.repl.isr = []int32{0, 1}
	m.rebuilds.after(next)
	deadline := time.Now().Add(10 * time.Second)
	for next.producersUnknown() {
		if time.Now().After(deadline) {
			t.Fatal("the follower's producer table was not rebuilt in 10 s")
		}
		time.Sleep(time.Millisecond) // polls the condition
	}
	setLeader(next, 0, 1)
	next.repl.isr = []int32{0}
	counts.n.Store(0)
	for i, want := range []AppendResult{first, second} {
		res, err := next.append(idemBatch(t, 7, 0, int32(i), string(rune('a'+i)), now))
		if err != nil || !res.Duplicate || res.BaseOffset != want.BaseOffset {
			t.Fatalf("retry of batch %d on the new leader: %+v %v, want the duplicate at %d", i, res, err, want.BaseOffset)
		}
	}
	if reads := counts.n.Load(); reads != 0 {
		t.Fatalf("the new leader read its log %d times to check its producers", reads)
	}
}

// A background rebuild that fails (a log whose reads fail) is retried
// after a delay that doubles from rebuildRetryMin up to rebuildRetryMax,
// not at the follower's next apply: without it, every fetch that brings
// the partition new batches read its log again, on the one rebuild
// goroutine the other partitions' rebuilds wait for. A rebuild that
// succeeds at last forgets the partition's failures.
func TestFollowerProducerRebuildRetriesWithBackoff(t *testing.T) {
	old := leaderPartition(t)
	next := followerOn(t, vfs.OSFS())
	if _, err := old.append(idemBatch(t, 7, 0, 0, "a", time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	copyFrom(t, old, next)
	next.appendMu.Lock()
	next.forgetProducersLocked() // as a restart leaves it
	next.appendMu.Unlock()
	next.repl.isr = []int32{0, 1}

	m := testFetchManager(t, 0)
	r := m.rebuilds
	var clock atomic.Int64 // nanoseconds past start
	start := time.Now()
	r.now = func() time.Time { return start.Add(time.Duration(clock.Load())) }
	var attempts atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	r.load = func(p *Partition) error {
		attempts.Add(1)
		if failing.Load() {
			return errors.New("injected read error")
		}
		return rebuildProducers(p)
	}
	// applies is n applies of fetched batches to next, each waited for.
	applies := func(n int) {
		t.Helper()
		for range n {
			r.after(next)
			deadline := time.Now().Add(time.Minute)
			for {
				r.mu.Lock()
				busy := r.queued[next]
				r.mu.Unlock()
				if !busy {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("a queued rebuild did not finish in a minute")
				}
				time.Sleep(time.Millisecond) // polls the condition
			}
		}
	}
	applies(20)
	if n := attempts.Load(); n != 1 {
		t.Fatalf("20 applies after a failed rebuild made %d attempts, want 1 until the retry delay passes", n)
	}
	delay := rebuildRetryMin
	for retry := 1; retry <= 8; retry++ {
		clock.Add(int64(delay - time.Millisecond))
		applies(5)
		if n := attempts.Load(); n != int64(retry) {
			t.Fatalf("retry %d: %d attempts %v after the failure, want %d before its delay of %v", retry, n, delay-time.Millisecond, retry, delay)
		}
		clock.Add(int64(time.Millisecond))
		applies(5)
		if n := attempts.Load(); n != int64(retry+1) {
			t.Fatalf("retry %d: %d attempts once its delay of %v passed, want %d", retry, n, delay, retry+1)
		}
		delay = min(2*delay, rebuildRetryMax)
	}
	if delay != rebuildRetryMax {
		t.Fatalf("the delay grew to %v only; the test should reach its bound %v", delay, rebuildRetryMax)
	}
	failing.Store(false)
	clock.Add(int64(delay))
	applies(1)
	if next.producersUnknown() {
		t.Fatal("the rebuild that succeeded left the producer table unknown")
	}
	r.mu.Lock()
	left := len(r.failed)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d partitions' failures kept after their rebuild succeeded", left)
	}
	// The failure of a partition not retried since (idle, deleted or
	// moved) is forgotten by the next rebuild of another once its time is
	// rebuildRetryMax past, rather than kept with its partition.
	r.mu.Lock()
	r.settleLocked(next, errors.New("injected read error"))
	clock.Add(int64(rebuildRetryMin + rebuildRetryMax + time.Millisecond))
	r.settleLocked(old, nil)
	_, kept := r.failed[next]
	r.mu.Unlock()
	if kept {
		t.Fatalf("a failure not retried for %v past its time was kept", rebuildRetryMax)
	}
}
