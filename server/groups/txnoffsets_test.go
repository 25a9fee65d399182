package groups

import (
	"context"
	"errors"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
)

// Offsets staged in transactions: invisible until the commit marker,
// dropped by an abort, fenced by an older epoch, and still there for a new
// coordinator after a failover between TxnOffsetCommit and the marker.
func TestTxnOffsetsStagedThenCommittedAcrossFailover(t *testing.T) {
	b := newFakeBackend(testNode, 1)
	c, _ := newTestCoordinator(t, b)
	loaded(t, c, 0)
	ctx := context.Background()
	orders := tp{Topic: "orders", Partition: 1}
	stage := func(c *Coordinator, pid int64, epoch int16, off int64) error {
		errs, err := c.StageTxnOffsets(ctx, kafkaproto.MemberRef{Group: "g", Generation: -1}, pid, epoch,
			[]kafkaproto.CommitOffset{{TopicPartition: orders, Offset: off, LeaderEpoch: -1}})
		if err == nil && errs[0] != nil {
			err = errs[0]
		}
		return err
	}
	fetch := func(c *Coordinator) int64 {
		out, err := c.FetchOffsets(ctx, "g", []tp{orders})
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Offset
	}
	if err := stage(c, 7, 1, 10); err != nil {
		t.Fatal(err)
	}
	if !c.PendingTxnOffset("g", orders) || fetch(c) != -1 {
		t.Fatalf("staged offset: pending %v, committed %d", c.PendingTxnOffset("g", orders), fetch(c))
	}
	if err := stage(c, 7, 0, 11); !errors.Is(err, kafkaproto.ErrProducerFenced) {
		t.Fatalf("older epoch: %v", err)
	}
	// Abort: nothing committed, nothing pending.
	if err := c.CompleteTxnOffsets(ctx, 7, false, 0); err != nil {
		t.Fatal(err)
	}
	if c.PendingTxnOffset("g", orders) || fetch(c) != -1 {
		t.Fatal("aborted offsets kept or committed")
	}
	// Stage again, then the coordinator fails over before the marker.
	if err := stage(c, 7, 2, 20); err != nil {
		t.Fatal(err)
	}
	c2, _ := newTestCoordinator(t, b)
	loaded(t, c2, 0)
	if !c2.PendingTxnOffset("g", orders) || fetch(c2) != -1 {
		t.Fatalf("after failover: pending %v, committed %d", c2.PendingTxnOffset("g", orders), fetch(c2))
	}
	if err := c2.CompleteTxnOffsets(ctx, 7, true, 0); err != nil {
		t.Fatal(err)
	}
	if c2.PendingTxnOffset("g", orders) || fetch(c2) != 20 {
		t.Fatalf("after commit: pending %v, committed %d", c2.PendingTxnOffset("g", orders), fetch(c2))
	}
	// A retried marker finds nothing left; a third load agrees.
	if err := c2.CompleteTxnOffsets(ctx, 7, true, 0); err != nil {
		t.Fatal(err)
	}
	c3, _ := newTestCoordinator(t, b)
	loaded(t, c3, 0)
	if c3.PendingTxnOffset("g", orders) || fetch(c3) != 20 {
		t.Fatalf("third load: pending %v, committed %d", c3.PendingTxnOffset("g", orders), fetch(c3))
	}
	// A broker that does not lead the partition refuses the marker.
	b.setLeader(0, 2, 2)
	c3.follow(ctx)
	if err := c3.CompleteTxnOffsets(ctx, 7, true, 0); !errors.Is(err, kafkaproto.ErrNotCoordinator) {
		t.Fatalf("marker to a former coordinator: %v", err)
	}
}

func TestTxnOffsetKeyRoundTrip(t *testing.T) {
	g, tpart, pid, ok, err := parseTxnOffsetKey(txnOffsetKey("grp", tp{Topic: "t", Partition: 3}, 1<<40))
	if !ok || err != nil || g != "grp" || tpart.Topic != "t" || tpart.Partition != 3 || pid != 1<<40 {
		t.Fatalf("round trip: %q %v %d %v %v", g, tpart, pid, ok, err)
	}
	if _, _, _, ok, _ := parseTxnOffsetKey(offsetKey("grp", tp{Topic: "t"})); ok {
		t.Fatal("an offset key parsed as a transactional one")
	}
	if _, _, _, ok, err := parseTxnOffsetKey([]byte{0, 3, 0, 9}); !ok || err == nil {
		t.Fatal("truncated key accepted")
	}
}
