package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
)

// leaderPartition is a test partition led by this broker (id 0), alone in
// its ISR.
func leaderPartition(t *testing.T) *Partition {
	t.Helper()
	p := testPartition(t, nil)
	p.repl.isr = []int32{0}
	setLeader(p, 0, 1)
	return p
}

// batchAt returns the stored batch holding offset.
func batchAt(t *testing.T, p *Partition, offset int64) []byte {
	t.Helper()
	c, err := p.log().Read(offset, 1<<20, p.log().EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	info, ok, err := recordbatch.Next(data)
	if err != nil || !ok {
		t.Fatalf("batch at %d: %v %v", offset, ok, err)
	}
	return data[:info.Size]
}

// A marker is written as a control batch, replicated (acks=all) before
// WriteTxnMarker returns; clients cannot write one themselves.
func TestWriteTxnMarker(t *testing.T) {
	p := leaderPartition(t)
	now := time.Now().UnixMilli()
	if _, err := p.append(idemBatch(t, 5, 2, 0, "v", now)); err != nil {
		t.Fatal(err)
	}
	m := recordbatch.Marker{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 4, Type: recordbatch.ControlCommit}
	res, wait, err := p.appendMarker(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 1 || p.hwm.Load() != 2 {
		t.Fatalf("marker at %d, high watermark %d", res.BaseOffset, p.hwm.Load())
	}
	got, err := recordbatch.ParseControl(batchAt(t, p, 1))
	if err != nil || got != m {
		t.Fatalf("stored marker %+v %v, want %+v", got, err, m)
	}

	if _, err := p.append(recordbatch.BuildControl(m, now)); !errors.Is(err, recordbatch.ErrInvalidRecord) {
		t.Fatalf("client control batch: %v, want invalid record", err)
	}
	// A marker for an epoch older than the producer's is fenced.
	old := m
	old.ProducerEpoch = 1
	if _, _, err := p.appendMarker(old); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale marker: %v, want invalid producer epoch", err)
	}
	// Below min.insync.replicas nothing is written.
	p.minISR.Store(2)
	if _, _, err := p.appendMarker(m); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("marker below min ISR: %v", err)
	}
	if end := p.log().EndOffset(); end != 2 {
		t.Fatalf("log end %d after refused writes, want 2", end)
	}
}

// txnDataBatch is a transactional batch of one record.
func txnDataBatch(t *testing.T, pid int64, epoch int16, seq int32, value string) []byte {
	t.Helper()
	raw := idemBatch(t, pid, epoch, seq, value, time.Now().UnixMilli())
	raw[recordbatch.AttrAt+1] |= recordbatch.AttrTransactional
	recordbatch.SetCRC(raw)
	return raw
}

// Producer fencing on the log side: a marker bumps the producer's epoch
// (zombie batches of the old epoch are INVALID_PRODUCER_EPOCH), a marker
// from an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED, and
// both survive the producer state being rebuilt from the log (a restart or
// a new leader). The LSO follows the open transaction.
func TestTxnProducerFencing(t *testing.T) {
	p := leaderPartition(t)
	if _, err := p.append(txnDataBatch(t, 9, 0, 0, "a")); err != nil {
		t.Fatal(err)
	}
	if lso, err := p.LSO(); err != nil || lso != 0 {
		t.Fatalf("LSO with an open transaction at 0: %d %v", lso, err)
	}
	writeMarker := func(m recordbatch.Marker) error {
		_, wait, err := p.appendMarker(m)
		if err == nil {
			err = wait(context.Background())
		}
		return err
	}
	// The coordinator aborts on a timeout, bumping the epoch to 1.
	if err := writeMarker(recordbatch.Marker{ProducerID: 9, ProducerEpoch: 1, CoordinatorEpoch: 5, Type: recordbatch.ControlAbort}); err != nil {
		t.Fatal(err)
	}
	if lso, err := p.LSO(); err != nil || lso != 2 {
		t.Fatalf("LSO after the abort: %d %v, want 2", lso, err)
	}
	for round := range 2 {
		if _, err := p.append(txnDataBatch(t, 9, 0, 1, "zombie")); !errors.Is(err, ErrInvalidProducerEpoch) {
			t.Fatalf("round %d: zombie batch at the old epoch: %v", round, err)
		}
		if err := writeMarker(recordbatch.Marker{ProducerID: 9, ProducerEpoch: 1, CoordinatorEpoch: 4, Type: recordbatch.ControlCommit}); !errors.Is(err, ErrCoordinatorFenced) {
			t.Fatalf("round %d: marker from an older coordinator: %v", round, err)
		}
		p.producers.Reset() // rebuilt from the log, as after a restart
	}
	if _, err := p.append(txnDataBatch(t, 9, 1, 0, "new")); err != nil {
		t.Fatalf("the new epoch's first batch: %v", err)
	}
	if lso, err := p.LSO(); err != nil || lso != 2 {
		t.Fatalf("LSO with the new transaction open at 2: %d %v", lso, err)
	}
}

// A follower copies the leader's batches as they are and knows the same
// open transactions, so it stops read_committed readers at the same
// offset once it leads.
func TestTxnStateOnFollower(t *testing.T) {
	leader := leaderPartition(t)
	follower := testPartition(t, nil)
	setLeader(follower, 1, 0) // led by another broker
	if _, err := leader.append(idemBatch(t, 3, 0, 0, "plain", time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.append(txnDataBatch(t, 4, 0, 0, "open")); err != nil {
		t.Fatal(err)
	}
	copyFrom(t, leader, follower)
	if fuo, err := follower.log().FirstUnstableOffset(); err != nil || fuo != 1 {
		t.Fatalf("follower's first unstable offset %d %v, want 1", fuo, err)
	}
	_, wait, err := leader.appendMarker(recordbatch.Marker{ProducerID: 4, Type: recordbatch.ControlAbort})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	copyFrom(t, leader, follower)
	if fuo, err := follower.log().FirstUnstableOffset(); err != nil || fuo != 3 {
		t.Fatalf("follower's first unstable offset after the abort %d %v, want 3", fuo, err)
	}
	if a, err := follower.log().AbortedTxns(0, 3); err != nil || len(a) != 1 || a[0].ProducerID != 4 || a[0].FirstOffset != 1 {
		t.Fatalf("follower's aborted transactions %+v %v", a, err)
	}
}
