package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// Leader epochs decide where a returning replica truncates, so they must be
// exact (issue 20, item 1: epochs that went backwards in the log and
// replicas that disagreed on a batch's epoch).

func epochTestPartition(t *testing.T, self int32) *Partition {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	p.repl.self = self
	t.Cleanup(func() { p.close() })
	return p
}

// lead makes p the leader at epoch and appends n records with values
// prefix-0.., each its own batch.
func lead(t *testing.T, p *Partition, epoch int32, prefix string, n int) {
	t.Helper()
	p.setMeta(raftfsm.Partition{Leader: p.repl.self, LeaderEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{p.repl.self}}, p.repl.self)
	for i := range n {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: fmt.Appendf(nil, "%s-%d", prefix, i), Timestamp: 1}})); err != nil {
			t.Fatalf("append %s-%d at epoch %d: %v", prefix, i, epoch, err)
		}
	}
}

// follow makes p a follower of leader at epoch.
func follow(p *Partition, leader, epoch int32) {
	p.setMeta(raftfsm.Partition{Leader: leader, LeaderEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{leader}}, p.repl.self)
}

// replicate runs what the replica fetcher does between a follower and its
// leader, without the network: OffsetForLeaderEpoch rounds until the
// divergence is found, then fetches up to the leader's log end.
func replicate(t *testing.T, leader, follower *Partition) {
	t.Helper()
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("no divergence point after 10 rounds")
		}
		last := follower.log().LeaderEpoch()
		if last < 0 {
			break
		}
		epoch, end, err := leader.EndOffsetForEpoch(last)
		if err != nil {
			t.Fatal(err)
		}
		cut, done, err := divergence(follower, epoch, end)
		if err != nil {
			t.Fatal(err)
		}
		if err := follower.truncateAsFollower(cut, follower.leaderEpoch.Load()); err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	for follower.log().EndOffset() < leader.log().EndOffset() {
		c, err := leader.ReadReplica(follower.log().EndOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Bytes()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := follower.appendAsFollower(b, follower.leaderEpoch.Load()); err != nil {
			t.Fatal(err)
		}
	}
}

func logBytes(t *testing.T, p *Partition) []byte {
	t.Helper()
	c, err := p.log().Read(p.log().StartOffset(), 1<<30, p.log().EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchEpochs lists each batch's leader epoch in log order.
func batchEpochs(t *testing.T, p *Partition) []int32 {
	t.Helper()
	var out []int32
	if err := splitBatches(logBytes(t, p), func(b batchView) error {
		out = append(out, batchLeaderEpoch(b.Raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A leader told an older epoch than the one its log ends with (an older
// metadata image applied after a newer one) refuses the write: it used to
// append it with the older epoch, so epochs went backwards in the log.
func TestLeaderRefusesEpochBelowItsLog(t *testing.T) {
	p := epochTestPartition(t, 1)
	lead(t, p, 6, "a", 2)
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1) // an older image
	_, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("stale"), Timestamp: 1}}))
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append at epoch 5 after epoch 6: %v, want not leader", err)
	}
	if got := batchEpochs(t, p); !slices.Equal(got, []int32{6, 6}) {
		t.Fatalf("batch epochs %v, want [6 6]", got)
	}
}

// A follower whose last epoch the leader never wrote (it led at that epoch
// and wrote a tail nobody has) is cut where its history and the leader's
// part, even when the leader's log ends with an older epoch than the
// follower's and the leader has written nothing at its own epoch yet. The
// leader used to answer "unknown epoch" and the follower kept its tail:
// replicas then held different batches at the same offsets.
func TestFollowerTruncatesTailTheLeaderNeverHad(t *testing.T) {
	a, b := epochTestPartition(t, 1), epochTestPartition(t, 2)
	// Both hold epoch 0's offsets 0-4.
	lead(t, a, 0, "e0", 5)
	follow(b, 1, 0)
	replicate(t, a, b)
	// a leads at epoch 1 and writes 5-9, which b never gets.
	lead(t, a, 1, "e1", 5)
	// b leads at epoch 2 without them and writes its own 5-7.
	lead(t, b, 2, "e2", 3)
	// a leads again at epoch 3 and has written nothing at it yet.
	a.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
	follow(b, 1, 3)
	replicate(t, a, b)

	if !bytes.Equal(logBytes(t, a), logBytes(t, b)) {
		t.Fatalf("follower's log differs from the leader's: epochs %v vs %v", batchEpochs(t, b), batchEpochs(t, a))
	}
	// And when the leader has written at its epoch since.
	lead(t, b, 4, "e4", 2)
	a.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
	lead(t, a, 5, "e5", 1)
	follow(b, 1, 5)
	replicate(t, a, b)
	if !bytes.Equal(logBytes(t, a), logBytes(t, b)) {
		t.Fatalf("follower's log differs from the leader's: epochs %v vs %v", batchEpochs(t, b), batchEpochs(t, a))
	}
	if got := batchEpochs(t, b); !slices.IsSorted(got) {
		t.Fatalf("epochs go backwards: %v", got)
	}
}

// A follower never appends a batch whose epoch is below its log's last
// one: that means it still holds a tail the leader does not have.
func TestFollowerRefusesOlderEpochAfterNewer(t *testing.T) {
	a, b := epochTestPartition(t, 1), epochTestPartition(t, 2)
	lead(t, a, 1, "e1", 3)
	lead(t, b, 2, "e2", 1) // b's own divergent offset 0
	follow(b, 1, 3)
	c, err := a.ReadReplica(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := c.Bytes()
	c.Close()
	if err := b.appendAsFollower(data, b.leaderEpoch.Load()); !errors.Is(err, errDiverged) {
		t.Fatalf("appending epoch 1 after epoch 2: %v, want diverged", err)
	}
}

// A consumer that read up to the old leader's high watermark and fetches
// from a new leader that has not learned that far yet gets nothing to read,
// not OFFSET_OUT_OF_RANGE: franz-go took that for a truncated log and
// started over at offset 0 (issue 20, item 2). Past the log end it is out
// of range.
func TestReadBetweenHighWatermarkAndLogEnd(t *testing.T) {
	p := epochTestPartition(t, 1)
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 1)
	for i := range 4 {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: fmt.Appendf(nil, "r%d", i), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	p.FollowerFetched(2, 2, 2) // the new leader's high watermark: 2 of 4
	if hw := p.hwm.Load(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
	for _, off := range []int64{2, 3, 4} {
		c, err := p.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d (high watermark 2, log end 4): %v", off, err)
		}
		if n := c.Len(); n != 0 {
			t.Fatalf("read at %d returned %d bytes past the high watermark", off, n)
		}
		c.Close()
		res, err := p.ReadDecoded(off, 10, 1<<20, false)
		if err != nil || len(res.Records) != 0 || res.Next != off {
			t.Fatalf("HTTP read at %d: %d records, next %d, %v", off, len(res.Records), res.Next, err)
		}
	}
	if _, err := p.Read(5, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the log end: %v, want out of range", err)
	}
}

// An acks=all write waiting for its replicas on a leader whose lease ends
// (its heartbeats unanswered for a session timeout: cut off from the
// controllers, about to be replaced) is answered NOT_LEADER then, not
// after the request's whole timeout: the producer moves on to the next
// leader instead of waiting on this one (issue 20: a cut-off leader held
// writes it took just before its lease ended for 4 s, past the election
// of its successor).
func TestReplicationWaitEndsWithLease(t *testing.T) {
	p := epochTestPartition(t, 1)
	var valid atomic.Bool
	valid.Store(true)
	p.leaseValid = func(time.Time) bool { return valid.Load() }
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 1)
	_, wait, err := p.AppendForAcks(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("cut off"), Timestamp: 1}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- wait.Wait(ctx) }()
	valid.Store(false) // follower 2 never fetches; the lease ends
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("wait after the lease ended: %v, want not leader", err)
	}
}
