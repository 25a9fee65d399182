package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runnel/runnel/segments"
)

// leaderPartition is a test partition led by this broker (id 0), alone in
// its ISR.
func leaderPartition(t *testing.T) *partition {
	t.Helper()
	p := testPartition(t, nil)
	p.repl.isr = []int32{0}
	p.leader.Store(0)
	p.leaderEpoch.Store(1)
	return p
}

// batchAt returns the stored batch holding offset.
func batchAt(t *testing.T, p *partition, offset int64) []byte {
	t.Helper()
	c, err := p.log.Read(offset, 1<<20, p.log.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	info, ok, err := segments.NextBatch(data)
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
	m := segments.Marker{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 4, Type: segments.ControlCommit}
	res, wait, err := p.appendMarker(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.baseOffset != 1 || p.hwm.Load() != 2 {
		t.Fatalf("marker at %d, high watermark %d", res.baseOffset, p.hwm.Load())
	}
	got, err := segments.ParseControlBatch(batchAt(t, p, 1))
	if err != nil || got != m {
		t.Fatalf("stored marker %+v %v, want %+v", got, err, m)
	}

	if _, err := p.append(segments.BuildControlBatch(m, now)); !errors.Is(err, segments.ErrInvalidRecord) {
		t.Fatalf("client control batch: %v, want invalid record", err)
	}
	// A marker for an epoch older than the producer's is fenced.
	old := m
	old.ProducerEpoch = 1
	if _, _, err := p.appendMarker(old); !errors.Is(err, errInvalidProducerEpoch) {
		t.Fatalf("stale marker: %v, want invalid producer epoch", err)
	}
	// Below min.insync.replicas nothing is written.
	p.minISR.Store(2)
	if _, _, err := p.appendMarker(m); !errors.Is(err, errNotEnoughReplicas) {
		t.Fatalf("marker below min ISR: %v", err)
	}
	if end := p.log.EndOffset(); end != 2 {
		t.Fatalf("log end %d after refused writes, want 2", end)
	}
}
