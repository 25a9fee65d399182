package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// The leader's ISR and high watermark decisions, in-process: before the
// data plane had its own package only the process tests (e2e_replication,
// e2e_hostile_replication) reached them.

// isrLeader is partition t-0 led by broker 1 with replicas 1, 2 and 3, the
// ISR isr, and n records appended (one batch each).
func isrLeader(t *testing.T, isr []int32, n int) *Partition {
	t.Helper()
	p := epochTestPartition(t, 1)
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: isr}, 1)
	for range n {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func fetched(t *testing.T, p *Partition, id int32, offset int64) {
	t.Helper()
	if err := p.FollowerFetched(id, offset, 1); err != nil {
		t.Fatalf("follower %d fetched at %d: %v", id, offset, err)
	}
}

func TestHighWatermarkIsSlowestInSyncReplica(t *testing.T) {
	p := isrLeader(t, []int32{1, 2, 3}, 5)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any follower fetched, want 0", hw)
	}
	fetched(t, p, 2, 5)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d while follower 3 is unknown, want 0", hw)
	}
	fetched(t, p, 3, 3)
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3 (the slowest in-sync replica)", hw)
	}
	fetched(t, p, 3, 5)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5", hw)
	}
	// A follower that fetches from an older offset (it truncated) does not
	// move the high watermark back.
	fetched(t, p, 2, 2)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark went back to %d", hw)
	}
}

func TestReplicaOutsideISRDoesNotHoldHighWatermark(t *testing.T) {
	p := isrLeader(t, []int32{1, 2}, 4)
	fetched(t, p, 2, 4) // 3 never fetched
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4: broker 3 is not in the ISR", hw)
	}
	// The ISR shrinks to the leader alone: its own log end is the mark.
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}}, 1)
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d with the leader alone in the ISR, want 5", hw)
	}
}

// A fetch position is taken only from a replica, and only within the
// leader's log: anything else would move the high watermark over records
// that are not replicated (TestHostileSpoofedReplicaFetch over the wire).
func TestFollowerFetchedRefusesSpoofedPositions(t *testing.T) {
	p := isrLeader(t, []int32{1, 2}, 3)
	if err := p.FollowerFetched(2, 99, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("fetch past the log end: %v, want ErrOffsetOutOfRange", err)
	}
	if err := p.FollowerFetched(9, 3, -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fetch by a broker that is no replica: %v, want ErrNotLeader", err)
	}
	if err := p.FollowerFetched(9, 3, 1); !errors.Is(err, kafkaproto.ErrUnknownLeaderEpoch) {
		t.Fatalf("fetch by a broker that is no replica, with an epoch: %v, want UNKNOWN_LEADER_EPOCH", err)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("refused fetches moved the high watermark to %d", hw)
	}
}

func TestWantedISR(t *testing.T) {
	const lagMax = 10 * time.Second
	p := isrLeader(t, []int32{1, 2}, 3)
	start := time.Now()
	if _, _, ok := p.wantedISR(start, lagMax); ok {
		t.Fatal("ISR change wanted with nothing lagging and nobody caught up")
	}
	// Broker 3 catches up to the high watermark: it joins.
	fetched(t, p, 2, 3)
	fetched(t, p, 3, 3)
	isr, epoch, ok := p.wantedISR(time.Now(), lagMax)
	if !ok || !slices.Equal(isr, []int32{1, 2, 3}) || epoch != 4 {
		t.Fatalf("wanted ISR %v at partition epoch %d (change %v), want [1 2 3] at 4", isr, epoch, ok)
	}
	// The controller applied it; the leader appends and the followers stop
	// fetching. Within lagMax nothing changes; once they lagged longer,
	// both leave.
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 1)
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := p.wantedISR(time.Now(), lagMax); ok {
		t.Fatal("ISR change wanted before the followers lagged lagMax")
	}
	isr, epoch, ok = p.wantedISR(time.Now().Add(2*lagMax), lagMax)
	if !ok || !slices.Equal(isr, []int32{1}) || epoch != 5 {
		t.Fatalf("wanted ISR %v at %d (change %v) after the followers lagged, want [1] at 5", isr, epoch, ok)
	}
}

func TestAcksAllWaitsForInSyncReplicas(t *testing.T) {
	p := isrLeader(t, []int32{1, 2}, 0)
	res, wait, err := p.AppendForAcks(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("a"), Timestamp: 1}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wait.Wait(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait before the follower fetched: %v, want the context's error", err)
	}
	fetched(t, p, 2, res.LastOffset+1)
	if err := wait.Wait(context.Background()); err != nil {
		t.Fatalf("wait after the follower fetched: %v", err)
	}
	// A write whose leadership moves before it is replicated fails with
	// NOT_LEADER instead of waiting out its timeout.
	_, wait, err = p.AppendForAcks(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("b"), Timestamp: 1}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.setMeta(raftfsm.Partition{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{2}}, 1)
	if err := wait.Wait(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait after the leadership moved: %v, want ErrNotLeader", err)
	}
}

// An acks=all wait that finds its write replicated already makes no
// channel and no lease ticker: a new leader's request of 100,000
// partitions waits for each in turn, most of them replicated by then
// (issue 19).
func TestReplicatedWaitAllocatesNothing(t *testing.T) {
	p := isrLeader(t, []int32{1, 2}, 0)
	p.leaseValid = func(time.Time) bool { return true }
	res, wait, err := p.AppendForAcks(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("a"), Timestamp: 1}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	fetched(t, p, 2, res.LastOffset+1)
	ctx := context.Background()
	var err2 error
	if allocs := testing.AllocsPerRun(100, func() { err2 = wait.Wait(ctx) }); allocs != 0 || err2 != nil {
		t.Fatalf("a replicated write's wait: %v allocations, error %v; want none", allocs, err2)
	}
}

func TestAcksAllRefusedBelowMinISR(t *testing.T) {
	p := isrLeader(t, []int32{1}, 0)
	p.applyConfig(map[string]string{"min.insync.replicas": "2"})
	end := p.log().EndOffset()
	if _, _, err := p.AppendForAcks(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("a"), Timestamp: 1}}), nil); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with 1 in-sync replica of min 2: %v, want ErrNotEnoughReplicas", err)
	}
	if p.log().EndOffset() != end {
		t.Fatal("a refused acks=all write was appended")
	}
}

// fakeMeta is a Metadata that records what the broker proposes.
type fakeMeta struct {
	mu       sync.Mutex
	img      *raftfsm.Image
	proposed []raftfsm.ChangePartition
	commands int   // ISR commands applied
	batches  int   // of which ChangePartitionsBatch
	err      error // Apply's answer
}

func (m *fakeMeta) Image() (*raftfsm.Image, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.img, make(chan struct{})
}

func (m *fakeMeta) Apply(_ context.Context, cmd raftfsm.Command) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cmd.ChangePartition != nil {
		m.commands++
		m.proposed = append(m.proposed, *cmd.ChangePartition)
	}
	topics := []raftfsm.ChangePartitions{}
	if cmd.ChangePartitions != nil {
		m.commands++
		topics = append(topics, *cmd.ChangePartitions)
	}
	if cmd.ChangePartitionsBatch != nil {
		m.commands++
		m.batches++
		topics = cmd.ChangePartitionsBatch.Topics
	}
	for _, t := range topics {
		for _, ch := range t.Changes {
			ch.Topic = t.Topic
			m.proposed = append(m.proposed, ch)
		}
	}
	return nil, m.err
}

func (m *fakeMeta) CatchUp(context.Context) error { return nil }

// The ISR loop proposes the wanted ISR to the controller with the
// partition's epochs, leaving out a caught-up follower whose broker is
// fenced (KIP-841: the controller would refuse it).
func TestUpdateISRProposesToController(t *testing.T) {
	meta := &fakeMeta{img: &raftfsm.Image{Index: 1, Brokers: map[int32]*raftfsm.Broker{
		1: {ID: 1, State: raftfsm.BrokerAlive}, 2: {ID: 2, State: raftfsm.BrokerAlive}, 3: {ID: 3, State: raftfsm.BrokerFenced},
	}}}
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler),
		ReplicaLagMax: 10 * time.Second}, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := isrLeader(t, []int32{1}, 2)
	fetched(t, p, 2, 2)
	fetched(t, p, 3, 2)
	b.updateISR(context.Background(), p, time.Now())
	if len(meta.proposed) != 1 {
		t.Fatalf("proposed %d changes, want 1", len(meta.proposed))
	}
	got := meta.proposed[0]
	if got.Topic != "t" || got.Partition != 0 || got.Leader != 1 || got.LeaderEpoch != 1 || got.PartitionEpoch != 4 || !slices.Equal(got.ISR, []int32{1, 2}) {
		t.Fatalf("proposed %+v, want t-0 leader 1 epochs 1/4 ISR [1 2] (broker 3 is fenced)", got)
	}
	// Nothing to change: nothing proposed.
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 1)
	b.updateISR(context.Background(), p, time.Now())
	if len(meta.proposed) != 1 {
		t.Fatalf("proposed %d changes, want still 1", len(meta.proposed))
	}
}

// A broker that leads many partitions whose followers all caught up (a
// broker back after a restart, issue 19) proposes their ISR changes in one
// command per topic, not one Raft round trip each, while the cluster's
// command version is 1: at thousands of partitions the restarted broker
// stayed out of the ISR for minutes.
func TestUpdateISRsOneCommandPerTopic(t *testing.T) {
	meta, b := isrBroker(t, 0)
	parts := caughtUpPartitions(t, []string{"a", "b"}, 20)
	b.updateISRs(context.Background(), parts, time.Now())
	if meta.commands != 2 || meta.batches != 0 || len(meta.proposed) != 40 {
		t.Fatalf("%d commands (%d batches) proposing %d changes, want 2 ChangePartitions (one per topic) proposing 40",
			meta.commands, meta.batches, len(meta.proposed))
	}
	checkRejoined(t, meta.proposed)
}

// From command version 2 the ISR changes of many topics go in one
// ChangePartitionsBatch (issue 19): a follower of 100 topics back from a
// restart waited for hundreds of one-topic commands, each a Raft round
// trip of 20-100 ms, proposed one after the other. A batch stays within
// its bounds: the partitions of the topics it rewrites.
func TestUpdateISRsBatchesTopics(t *testing.T) {
	meta, b := isrBroker(t, 2)
	names := []string{"a", "b", "c", "d", "e"}
	parts := caughtUpPartitions(t, names, 20)
	b.updateISRs(context.Background(), parts, time.Now())
	if meta.commands != 1 || meta.batches != 1 || len(meta.proposed) != 100 {
		t.Fatalf("%d commands (%d batches) proposing %d changes, want one batch proposing 100", meta.commands, meta.batches, len(meta.proposed))
	}
	checkRejoined(t, meta.proposed)

	// Topics whose partitions pass a batch's bound split it: each of these
	// holds half the bound and a bit, so one goes per command.
	var topics []*raftfsm.Topic
	for _, name := range names {
		topics = append(topics, &raftfsm.Topic{Name: name, Partitions: make([]raftfsm.Partition, maxISRBatchPartitions/2+1)})
	}
	meta.mu.Lock()
	meta.img.Topics = raftfsm.TopicMapOf(topics...)
	meta.commands, meta.batches, meta.proposed = 0, 0, nil
	meta.mu.Unlock()
	b.updateISRs(context.Background(), parts, time.Now())
	if meta.commands != 5 || meta.batches != 5 || len(meta.proposed) != 100 {
		t.Fatalf("%d commands (%d batches) proposing %d changes, want 5 batches (one topic each) proposing 100", meta.commands, meta.batches, len(meta.proposed))
	}
}

// isrBroker is broker 1 of three alive brokers, over a fakeMeta whose
// image has command version version.
func isrBroker(t *testing.T, version uint8) (*fakeMeta, *Broker) {
	t.Helper()
	meta := &fakeMeta{img: &raftfsm.Image{Index: 1, CommandVersion: version, Brokers: map[int32]*raftfsm.Broker{
		1: {ID: 1, State: raftfsm.BrokerAlive}, 2: {ID: 2, State: raftfsm.BrokerAlive}, 3: {ID: 3, State: raftfsm.BrokerAlive},
	}}}
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler),
		ReplicaLagMax: 10 * time.Second}, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return meta, b
}

// caughtUpPartitions are n partitions of each topic led by broker 1 with
// ISR [1 2], whose followers 2 and 3 both fetched at the log end.
func caughtUpPartitions(t *testing.T, topics []string, n int32) []*Partition {
	t.Helper()
	var parts []*Partition
	for _, topic := range topics {
		for i := range n {
			log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := newPartition(topic, i, [16]byte{1}, log, nil)
			t.Cleanup(func() { p.close() })
			p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 1)
			fetched(t, p, 2, 0)
			fetched(t, p, 3, 0)
			parts = append(parts, p)
		}
	}
	return parts
}

// checkRejoined checks that each change brings broker 3 back at the
// partition's epochs.
func checkRejoined(t *testing.T, proposed []raftfsm.ChangePartition) {
	t.Helper()
	for _, ch := range proposed {
		if ch.Leader != 1 || ch.LeaderEpoch != 1 || ch.PartitionEpoch != 4 || !slices.Equal(ch.ISR, []int32{1, 2, 3}) {
			t.Fatalf("proposed %+v, want leader 1 epochs 1/4 ISR [1 2 3]", ch)
		}
	}
}

// A follower keeping up with a steady stream of appends fetches at the log
// end as it was at its previous fetch, rarely at the end as it is now: it
// is caught up as of that previous fetch (Kafka's lastCaughtUpTime), not
// lagging once a lag budget passed without a fetch landing on the end.
func TestFollowerKeepingUpWithAppendsStaysInSync(t *testing.T) {
	const lagMax = 10 * time.Second
	p := isrLeader(t, []int32{1, 2, 3}, 2)
	p.repl.mu.Lock()
	for i := range p.repl.followers {
		p.repl.followers[i].caughtUpAt = time.Now().Add(-time.Hour) // last at the end long ago
	}
	p.repl.mu.Unlock()
	appendOne := func() {
		t.Helper()
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	// Each fetch of follower 2 brings it to the end as of its previous
	// fetch, one record behind the end now; follower 3 stays behind.
	fetched(t, p, 2, 1)
	fetched(t, p, 3, 1)
	for range 3 {
		end := p.log().EndOffset()
		appendOne()
		fetched(t, p, 2, end)
		fetched(t, p, 3, 1)
	}
	isr, _, _ := p.wantedISR(time.Now().Add(lagMax/2), lagMax)
	if !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("wanted ISR %v, want [1 2]: follower 2 reached the end of each previous fetch, 3 did not", isr)
	}
}

// With no controller to take them (the active one killed, the next not
// elected yet), a round of ISR changes stops at the first refusal, and
// the next round proposes them all again from what is true then. It went
// on proposing each topic's changes in turn, each waiting out its own
// timeout (up to 5 s): at 100 topics the ISR loop was stuck for minutes
// after a kill -9 of the controller's node, then proposed changes computed
// before the election, stale by then (issue 19).
func TestUpdateISRsStopsWithoutController(t *testing.T) {
	meta := &fakeMeta{img: &raftfsm.Image{Index: 1, Brokers: map[int32]*raftfsm.Broker{
		1: {ID: 1, State: raftfsm.BrokerAlive}, 2: {ID: 2, State: raftfsm.BrokerAlive}, 3: {ID: 3, State: raftfsm.BrokerAlive},
	}}, err: fmt.Errorf("%w (apply: no reachable controller for 4s)", raftfsm.ErrNotLeader)}
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler),
		ReplicaLagMax: 10 * time.Second}, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var parts []*Partition
	for _, topic := range []string{"a", "b", "c"} {
		log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := newPartition(topic, 0, [16]byte{1}, log, nil)
		t.Cleanup(func() { p.close() })
		p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 1)
		fetched(t, p, 2, 0)
		fetched(t, p, 3, 0)
		parts = append(parts, p)
	}
	b.updateISRs(context.Background(), parts, time.Now())
	if meta.commands != 1 {
		t.Fatalf("%d commands proposed with no controller, want 1 (the round stops at the first refusal)", meta.commands)
	}
	meta.mu.Lock()
	meta.err, meta.commands, meta.proposed = nil, 0, nil
	meta.mu.Unlock()
	b.updateISRs(context.Background(), parts, time.Now())
	if meta.commands != 3 || len(meta.proposed) != 3 {
		t.Fatalf("%d commands proposing %d changes once a controller took them, want 3 and 3", meta.commands, len(meta.proposed))
	}
}
