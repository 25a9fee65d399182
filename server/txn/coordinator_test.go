package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// Fakes of the coordinator's narrow interfaces.

type logRecord struct {
	key, value []byte
}

// fakeLog is __transaction_state in memory.
type fakeLog struct {
	mu      sync.Mutex
	parts   map[int32][]logRecord
	failErr error         // Append fails with it when set
	block   chan struct{} // Load waits for it when set
}

func newFakeLog() *fakeLog { return &fakeLog{parts: map[int32][]logRecord{}} }

func (l *fakeLog) Append(ctx context.Context, p int32, key, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failErr != nil {
		return l.failErr
	}
	l.parts[p] = append(l.parts[p], logRecord{key, value})
	return nil
}

func (l *fakeLog) Load(ctx context.Context, p int32, fn func(key, value []byte)) error {
	if l.block != nil {
		select {
		case <-l.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	recs := append([]logRecord(nil), l.parts[p]...)
	l.mu.Unlock()
	for _, r := range recs {
		fn(r.key, r.value)
	}
	return nil
}

// states returns the states stored for id, in order ("tombstone" for nil).
func (l *fakeLog) states(t *testing.T, id string) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, recs := range l.parts {
		for _, r := range recs {
			if k, _ := decodeKey(r.key); k != id {
				continue
			}
			if r.value == nil {
				out = append(out, "tombstone")
				continue
			}
			m, err := decodeValue(r.value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m.State.String())
		}
	}
	return out
}

type markerCall struct {
	m     Marker
	parts []TopicPartition
}

// fakeMarkers records marker writes; partitions in failing fail, and
// every call waits for gate when it is set.
type fakeMarkers struct {
	mu      sync.Mutex
	calls   []markerCall
	failing map[TopicPartition]bool
	gate    chan struct{}
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, m Marker, parts []TopicPartition) []error {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			errs := make([]error, len(parts))
			for i := range errs {
				errs[i] = ctx.Err()
			}
			return errs
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]error, len(parts))
	var ok []TopicPartition
	for i, p := range parts {
		if f.failing[p] {
			errs[i] = kafkaproto.ErrLeaderNotAvailable
			continue
		}
		ok = append(ok, p)
	}
	if len(ok) > 0 {
		f.calls = append(f.calls, markerCall{m, ok})
	}
	return errs
}

func (f *fakeMarkers) written() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]markerCall(nil), f.calls...)
}

func (f *fakeMarkers) setFailing(parts ...TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = map[TopicPartition]bool{}
	for _, p := range parts {
		f.failing[p] = true
	}
}

type fakeCluster struct {
	mu     sync.Mutex
	nextID int64
}

func (c *fakeCluster) AllocateProducerID(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return c.nextID + 1000, nil
}

func (c *fakeCluster) PartitionExists(t TopicPartition) bool {
	return (t.Topic == "a" || t.Topic == "b" || t.Topic == "__consumer_offsets") && t.Partition >= 0 && t.Partition < 3
}

func (c *fakeCluster) GroupPartition(_ context.Context, group string) (TopicPartition, error) {
	return TopicPartition{Topic: "__consumer_offsets", Partition: 1}, nil
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t   *testing.T
	log *fakeLog
	mk  *fakeMarkers
	clk *clock
	c   *Coordinator
}

// newHarness starts a coordinator leading both partitions of a
// two-partition __transaction_state, loaded.
func newHarness(t *testing.T, log *fakeLog) *harness {
	t.Helper()
	if log == nil {
		log = newFakeLog()
	}
	h := &harness{t: t, log: log, mk: &fakeMarkers{}, clk: &clock{now: time.UnixMilli(1_700_000_000_000)}}
	h.c = New(Config{Log: log, Markers: h.mk, Cluster: &fakeCluster{}, Now: h.clk.Now,
		MaxTimeout: time.Hour, IDExpiration: 24 * time.Hour})
	t.Cleanup(h.c.Close)
	h.c.Follow(2, map[int32]int32{0: 5, 1: 5})
	h.waitLoaded()
	return h
}

func (h *harness) waitLoaded() {
	h.t.Helper()
	h.waitFor("loaded", func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		for _, sh := range h.c.shards {
			if !sh.loaded {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond (bounded: 10 s).
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) state(id string) kafkaproto.TxnDescription {
	h.t.Helper()
	return h.c.Describe([]string{id})[0]
}

func (h *harness) waitState(id, state string) kafkaproto.TxnDescription {
	h.t.Helper()
	var d kafkaproto.TxnDescription
	h.waitFor(id+" in "+state, func() bool { d = h.state(id); return d.State == state })
	return d
}

func (h *harness) init(id string) TxnProducer {
	h.t.Helper()
	pid, epoch, err := h.c.InitProducerID(context.Background(), id, time.Minute, -1, -1)
	if err != nil {
		h.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return TxnProducer{TxnID: id, ID: pid, Epoch: epoch}
}

func (h *harness) add(p TxnProducer, parts ...TopicPartition) {
	h.t.Helper()
	errs, err := h.c.AddPartitions(context.Background(), p, parts)
	if err != nil {
		h.t.Fatalf("AddPartitions: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			h.t.Fatalf("AddPartitions %v: %v", parts[i], e)
		}
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

var (
	a0 = TopicPartition{Topic: "a", Partition: 0}
	a1 = TopicPartition{Topic: "a", Partition: 1}
	b2 = TopicPartition{Topic: "b", Partition: 2}
)

func TestInitProducerIDBumpsAndFences(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	p := h.init("x")
	if p.Epoch != 0 {
		t.Fatalf("first epoch %d", p.Epoch)
	}
	pid, epoch, err := h.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	if err != nil || pid != p.ID || epoch != 1 {
		t.Fatalf("second init: %d/%d %v", pid, epoch, err)
	}
	// KIP-360: the holder bumps its own epoch.
	pid, epoch, err = h.c.InitProducerID(ctx, "x", time.Minute, p.ID, 1)
	if err != nil || pid != p.ID || epoch != 2 {
		t.Fatalf("KIP-360 bump: %d/%d %v", pid, epoch, err)
	}
	// Its retry (the answer was lost) gets the same epoch again.
	pid, epoch, err = h.c.InitProducerID(ctx, "x", time.Minute, p.ID, 1)
	if err != nil || pid != p.ID || epoch != 2 {
		t.Fatalf("KIP-360 retry: %d/%d %v", pid, epoch, err)
	}
	// An older holder is fenced.
	_, _, err = h.c.InitProducerID(ctx, "x", time.Minute, p.ID, 0)
	wantErr(t, err, kafkaproto.ErrProducerFenced)
	_, _, err = h.c.InitProducerID(ctx, "x", 2*time.Hour, -1, -1)
	wantErr(t, err, kafkaproto.ErrInvalidTransactionTimeout)
	_, _, err = h.c.InitProducerID(ctx, "x", 0, -1, -1)
	wantErr(t, err, kafkaproto.ErrInvalidTransactionTimeout)
	// The zombie at epoch 0 can do nothing.
	_, err = h.c.AddPartitions(ctx, p, []TopicPartition{a0})
	wantErr(t, err, kafkaproto.ErrProducerFenced)
	wantErr(t, h.c.EndTxn(ctx, p, true), kafkaproto.ErrProducerFenced)
	_, err = h.c.AddPartitions(ctx, TxnProducer{TxnID: "x", ID: p.ID + 1, Epoch: 2}, []TopicPartition{a0})
	wantErr(t, err, kafkaproto.ErrInvalidProducerIDMapping)
	_, err = h.c.AddPartitions(ctx, TxnProducer{TxnID: "unknown", ID: p.ID, Epoch: 2}, []TopicPartition{a0})
	wantErr(t, err, kafkaproto.ErrInvalidProducerIDMapping)
}

func TestEpochExhaustionTakesNewProducerID(t *testing.T) {
	h := newHarness(t, nil)
	p := h.init("x")
	e := h.c.shards[Partition("x", 2)].txns["x"]
	e.mu.Lock()
	e.meta.Epoch = 32766
	e.mu.Unlock()
	pid, epoch, err := h.c.InitProducerID(context.Background(), "x", time.Minute, -1, -1)
	if err != nil || pid == p.ID || epoch != 0 {
		t.Fatalf("init at an exhausted epoch: %d/%d %v", pid, epoch, err)
	}
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	h := newHarness(t, nil)
	p := h.init("x")
	h.add(p, b2, a0)
	h.add(p, a0, a1) // a0 again: no duplicate
	d := h.state("x")
	if d.State != "Ongoing" || len(d.Partitions) != 3 || d.Partitions[0] != a0 || d.StartMS != h.clk.Now().UnixMilli() {
		t.Fatalf("ongoing: %+v", d)
	}
	if err := h.c.EndTxn(context.Background(), p, true); err != nil {
		t.Fatal(err)
	}
	d = h.waitState("x", "CompleteCommit")
	if len(d.Partitions) != 0 {
		t.Fatalf("complete: %+v", d)
	}
	calls := h.mk.written()
	if len(calls) != 1 || !calls[0].m.Commit || calls[0].m.ProducerID != p.ID || calls[0].m.Epoch != p.Epoch ||
		calls[0].m.CoordinatorEpoch != 5 || fmt.Sprint(calls[0].parts) != "[{a 0} {a 1} {b 2}]" {
		t.Fatalf("markers %+v", calls)
	}
	if got := fmt.Sprint(h.log.states(t, "x")); got != "[Empty Ongoing Ongoing PrepareCommit CompleteCommit]" {
		t.Fatalf("stored states %s", got)
	}
	// A retried EndTxn succeeds; the other outcome is INVALID_TXN_STATE.
	if err := h.c.EndTxn(context.Background(), p, true); err != nil {
		t.Fatal(err)
	}
	wantErr(t, h.c.EndTxn(context.Background(), p, false), kafkaproto.ErrInvalidTxnState)
	// The next transaction starts from CompleteCommit.
	h.add(p, a1)
	if d := h.state("x"); d.State != "Ongoing" || len(d.Partitions) != 1 {
		t.Fatalf("next transaction %+v", d)
	}
}

func TestAbortWritesAbortMarkers(t *testing.T) {
	h := newHarness(t, nil)
	p := h.init("x")
	h.add(p, a0)
	if err := h.c.EndTxn(context.Background(), p, false); err != nil {
		t.Fatal(err)
	}
	h.waitState("x", "CompleteAbort")
	if calls := h.mk.written(); len(calls) != 1 || calls[0].m.Commit {
		t.Fatalf("markers %+v", calls)
	}
	wantErr(t, h.c.EndTxn(context.Background(), p, true), kafkaproto.ErrInvalidTxnState)
}

func TestInvalidStatesAndPartitions(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	p := h.init("x")
	wantErr(t, h.c.EndTxn(ctx, p, true), kafkaproto.ErrInvalidTxnState) // nothing open
	errs, err := h.c.AddPartitions(ctx, p, []TopicPartition{a0, {Topic: "nope", Partition: 0}, {Topic: "a", Partition: 9}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, errs[0], kafkaproto.ErrOperationNotAttempted)
	wantErr(t, errs[1], kafkaproto.ErrUnknownTopicOrPartition)
	wantErr(t, errs[2], kafkaproto.ErrUnknownTopicOrPartition)
	if d := h.state("x"); d.State != "Empty" {
		t.Fatalf("after a refused add: %+v", d)
	}
	if d := h.state("missing"); !errors.Is(d.Err, kafkaproto.ErrTransactionalIDNotFound) {
		t.Fatalf("describe missing: %+v", d)
	}
}

func TestConcurrentTransactionsWhileCompleting(t *testing.T) {
	h := newHarness(t, nil)
	gate := make(chan struct{})
	h.mk.gate = gate
	p := h.init("x")
	h.add(p, a0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.c.EndTxn(ctx, p, true); err != nil { // answers once PrepareCommit is stored
		t.Fatal(err)
	}
	if d := h.state("x"); d.State != "PrepareCommit" {
		t.Fatalf("state %+v", d)
	}
	bg := context.Background()
	_, err := h.c.AddPartitions(bg, p, []TopicPartition{a1})
	wantErr(t, err, kafkaproto.ErrConcurrentTransactions)
	wantErr(t, h.c.EndTxn(bg, p, true), kafkaproto.ErrConcurrentTransactions)
	wantErr(t, h.c.EndTxn(bg, p, false), kafkaproto.ErrInvalidTxnState)
	_, _, err = h.c.InitProducerID(bg, "x", time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrConcurrentTransactions)
	close(gate)
	h.waitState("x", "CompleteCommit")
	h.add(p, a1)
}

func TestMarkersRetriedUntilWritten(t *testing.T) {
	h := newHarness(t, nil)
	h.mk.setFailing(b2)
	p := h.init("x")
	h.add(p, a0, b2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.c.EndTxn(ctx, p, false); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a marker in a0", func() bool { return len(h.mk.written()) > 0 })
	if d := h.state("x"); d.State != "PrepareAbort" {
		t.Fatalf("with b2 failing: %+v", d)
	}
	h.mk.setFailing()
	h.waitState("x", "CompleteAbort")
	calls := h.mk.written()
	if last := calls[len(calls)-1]; fmt.Sprint(last.parts) != "[{b 2}]" {
		t.Fatalf("retry wrote %+v (a0 only once)", calls)
	}
}

func TestInitAbortsOngoingTransaction(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	old := h.init("x")
	h.add(old, a0)
	_, _, err := h.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrConcurrentTransactions)
	h.waitState("x", "CompleteAbort")
	calls := h.mk.written()
	if len(calls) != 1 || calls[0].m.Commit || calls[0].m.Epoch != old.Epoch+1 {
		t.Fatalf("abort markers %+v (the bumped epoch fences the old producer in the partitions)", calls)
	}
	pid, epoch, err := h.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	if err != nil || pid != old.ID || epoch != old.Epoch+2 {
		t.Fatalf("retry: %d/%d %v", pid, epoch, err)
	}
	wantErr(t, h.c.EndTxn(ctx, old, true), kafkaproto.ErrProducerFenced)
}

func TestTimedOutTransactionAborted(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	p := h.init("x") // timeout: a minute
	h.add(p, a0)
	h.clk.advance(59 * time.Second)
	h.c.Tick()
	if d := h.state("x"); d.State != "Ongoing" {
		t.Fatalf("before the timeout: %+v", d)
	}
	h.clk.advance(2 * time.Second)
	h.c.Tick()
	d := h.waitState("x", "CompleteAbort")
	if d.Epoch != p.Epoch+1 {
		t.Fatalf("epoch %d, want the bumped %d", d.Epoch, p.Epoch+1)
	}
	wantErr(t, h.c.EndTxn(ctx, p, true), kafkaproto.ErrProducerFenced)
	// The producer recovers with KIP-360 (its id and old epoch).
	pid, epoch, err := h.c.InitProducerID(ctx, "x", time.Minute, p.ID, p.Epoch)
	if err != nil || pid != p.ID || epoch != p.Epoch+1 {
		t.Fatalf("recover: %d/%d %v", pid, epoch, err)
	}
}

func TestIdleTransactionalIDExpires(t *testing.T) {
	h := newHarness(t, nil)
	h.init("idle")
	open := h.init("open")
	h.add(open, a0)
	h.clk.advance(25 * time.Hour)
	// The open one times out first (aborted, then idle from now on).
	h.c.Tick()
	h.waitState("open", "CompleteAbort")
	if d := h.state("idle"); !errors.Is(d.Err, kafkaproto.ErrTransactionalIDNotFound) {
		t.Fatalf("idle id after expiry: %+v", d)
	}
	if got := fmt.Sprint(h.log.states(t, "idle")); got != "[Empty tombstone]" {
		t.Fatalf("stored %s", got)
	}
	if d := h.state("open"); d.Err != nil {
		t.Fatalf("just aborted id: %+v", d)
	}
	// A new producer of the expired id starts over.
	if p := h.init("idle"); p.Epoch != 0 {
		t.Fatalf("re-init %+v", p)
	}
}

func TestNotCoordinatorAndLoading(t *testing.T) {
	log := newFakeLog()
	log.block = make(chan struct{})
	c := New(Config{Log: log, Markers: &fakeMarkers{}, Cluster: &fakeCluster{}})
	defer c.Close()
	ctx := context.Background()
	_, _, err := c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrNotCoordinator) // no partitions known
	var mine, other string
	for i := 0; mine == "" || other == ""; i++ {
		id := fmt.Sprintf("id-%d", i)
		if Partition(id, 2) == 0 {
			mine = id
		} else {
			other = id
		}
	}
	c.Follow(2, map[int32]int32{0: 1})
	_, _, err = c.InitProducerID(ctx, other, time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrNotCoordinator)
	_, _, err = c.InitProducerID(ctx, mine, time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrCoordinatorLoading)
	close(log.block)
	h := &harness{t: t, c: c}
	h.waitLoaded()
	if _, _, err := c.InitProducerID(ctx, mine, time.Minute, -1, -1); err != nil {
		t.Fatal(err)
	}
	c.Follow(2, map[int32]int32{}) // leadership moved away
	_, _, err = c.InitProducerID(ctx, mine, time.Minute, -1, -1)
	wantErr(t, err, kafkaproto.ErrNotCoordinator)
}

// TestFailoverCompletesPreparedTransactions: a new coordinator loading
// the partition finishes what the old one had decided (PrepareCommit:
// markers written again, then CompleteCommit) and keeps open
// transactions open with their producer's epoch.
func TestFailoverCompletesPreparedTransactions(t *testing.T) {
	log := newFakeLog()
	old := newHarness(t, log)
	old.mk.setFailing(a0, a1, b2) // every marker fails on the old leader
	pc := old.init("committing")
	old.add(pc, a0, b2)
	pa := old.init("aborting")
	old.add(pa, a1)
	po := old.init("open")
	old.add(po, a0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := old.c.EndTxn(ctx, pc, true); err != nil {
		t.Fatal(err)
	}
	if err := old.c.EndTxn(ctx, pa, false); err != nil {
		t.Fatal(err)
	}
	old.c.Follow(2, map[int32]int32{}) // it loses leadership
	old.c.Close()

	h := newHarness(t, log) // the new leader, epoch 5 as well (the fake's)
	h.waitState("committing", "CompleteCommit")
	h.waitState("aborting", "CompleteAbort")
	var commits, aborts []string
	for _, c := range h.mk.written() {
		if c.m.Commit {
			commits = append(commits, fmt.Sprint(c.m.ProducerID, c.parts))
		} else {
			aborts = append(aborts, fmt.Sprint(c.m.ProducerID, c.parts))
		}
	}
	if fmt.Sprint(commits) != fmt.Sprintf("[%d [{a 0} {b 2}]]", pc.ID) || fmt.Sprint(aborts) != fmt.Sprintf("[%d [{a 1}]]", pa.ID) {
		t.Fatalf("markers after failover: commits %v aborts %v", commits, aborts)
	}
	d := h.state("open")
	if d.State != "Ongoing" || d.ProducerID != po.ID || d.Epoch != po.Epoch || len(d.Partitions) != 1 {
		t.Fatalf("open transaction after failover %+v", d)
	}
	h.add(po, a1)
	if err := h.c.EndTxn(context.Background(), po, true); err != nil {
		t.Fatal(err)
	}
	h.waitState("open", "CompleteCommit")
}

func TestStoreFailureChangesNothing(t *testing.T) {
	h := newHarness(t, nil)
	p := h.init("x")
	h.log.mu.Lock()
	h.log.failErr = fmt.Errorf("%w: too few replicas", kafkaproto.ErrCoordinatorNotAvailable)
	h.log.mu.Unlock()
	_, err := h.c.AddPartitions(context.Background(), p, []TopicPartition{a0})
	wantErr(t, err, kafkaproto.ErrCoordinatorNotAvailable)
	if d := h.state("x"); d.State != "Empty" || len(d.Partitions) != 0 {
		t.Fatalf("after a failed store %+v", d)
	}
}

func TestListFilters(t *testing.T) {
	h := newHarness(t, nil)
	p := h.init("open")
	h.add(p, a0)
	q := h.init("empty")
	h.clk.advance(time.Second)
	all := h.c.List(kafkaproto.TxnFilter{})
	if len(all) != 2 || all[0].TxnID != "empty" || all[1].TxnID != "open" {
		t.Fatalf("list %+v", all)
	}
	for _, tc := range []struct {
		f    kafkaproto.TxnFilter
		want string
	}{
		{kafkaproto.TxnFilter{States: []string{"Ongoing"}}, "open"},
		{kafkaproto.TxnFilter{ProducerIDs: []int64{q.ID}}, "empty"},
		{kafkaproto.TxnFilter{MinDuration: 500 * time.Millisecond}, "open"},
	} {
		got := h.c.List(tc.f)
		if len(got) != 1 || got[0].TxnID != tc.want {
			t.Errorf("List(%+v) = %+v", tc.f, got)
		}
	}
	if got := h.c.List(kafkaproto.TxnFilter{MinDuration: 2 * time.Second}); len(got) != 0 {
		t.Errorf("long-running filter: %+v", got)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	m := Meta{ProducerID: 9, Epoch: 3, LastProducerID: 8, LastEpoch: 2, Timeout: time.Minute, State: PrepareAbort,
		Partitions: []TopicPartition{a0, b2}, StartMS: 5, UpdateMS: 6}
	got, err := decodeValue(encodeValue(m))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(m) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	if id, err := decodeKey(encodeKey("tx-é")); err != nil || id != "tx-é" {
		t.Fatalf("key %q %v", id, err)
	}
	for _, bad := range []string{`{`, `{"v":2,"state":"Empty"}`, `{"v":1,"state":"Nope"}`, `{"v":1,"state":"Empty","timeout_ms":-1}`} {
		if _, err := decodeValue([]byte(bad)); !errors.Is(err, errBadRecord) {
			t.Errorf("decodeValue(%s): %v", bad, err)
		}
	}
	if _, err := decodeKey([]byte{0, 1, 'x'}); err == nil {
		t.Error("key of version 1 accepted")
	}
}

func TestPartitionIsKafkas(t *testing.T) {
	// abs(String.hashCode) % 50, as Kafka computes it.
	for id, want := range map[string]int32{"": 0, "a": 47, "my-txn": Partition("my-txn", 50)} {
		if got := Partition(id, 50); got != want {
			t.Errorf("Partition(%q) = %d, want %d", id, got, want)
		}
	}
	// "polygenelubricants" hashes to MinInt32: Kafka's abs maps it to 0.
	if got := Partition("polygenelubricants", 50); got != 0 {
		t.Errorf("MinInt32 hash: %d", got)
	}
}
