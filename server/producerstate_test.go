package server

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/runnel/runnel/segments"
)

// idemBatch is one record under producer pid, epoch and sequence seq.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, value string, ts int64) []byte {
	t.Helper()
	raw := buildBatch([]newRecord{{Timestamp: ts, Value: []byte(value)}})
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	binary.BigEndian.PutUint32(raw[batchCRCOffset:], crc32.Checksum(raw[batchAttrsOffset:], castagnoli))
	return raw
}

func testPartition(t *testing.T, policy *producerPolicy) *partition {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	p.producerPolicy = policy
	t.Cleanup(func() { p.close() })
	return p
}

// A batch reusing a stored sequence range with other records is no retry:
// it is refused, not acknowledged at the stored batch's offset.
func TestProducerDuplicateNeedsSameRecords(t *testing.T) {
	p := testPartition(t, nil)
	now := time.Now().UnixMilli()
	if _, err := p.append(idemBatch(t, 7, 0, 0, "mine-0", now)); err != nil {
		t.Fatal(err)
	}
	other, err := p.append(idemBatch(t, 7, 0, 1, "other-1", now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.append(idemBatch(t, 7, 0, 1, "mine-1", now)); !errors.Is(err, errOutOfOrderSequence) {
		t.Fatalf("same sequence, other records: %v, want out of order", err)
	}
	// A true retry (same records, even with a new header timestamp) is a
	// duplicate.
	res, err := p.append(idemBatch(t, 7, 0, 1, "other-1", now+5))
	if err != nil || !res.duplicate || res.baseOffset != other.baseOffset {
		t.Fatalf("retry: %+v %v, want duplicate at %d", res, err, other.baseOffset)
	}
}

// Ids at or above the controller's allocation mark are refused once the
// metadata had its chance to catch up; allocated ids pass.
func TestProducerIDMustBeAllocated(t *testing.T) {
	never := make(chan struct{})
	p := testPartition(t, &producerPolicy{expiration: time.Hour, maxIDs: 10,
		allocated: func() (int64, <-chan struct{}) { return 100, never }})
	now := time.Now().UnixMilli()
	if _, err := p.append(idemBatch(t, 99, 0, 0, "ok", now)); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		return // the refusal waits producerIDWait for the metadata
	}
	if _, err := p.append(idemBatch(t, 100, 0, 0, "forged", now)); !errors.Is(err, errUnknownProducerID) {
		t.Fatalf("unallocated id: %v, want unknown producer id", err)
	}
}

// Idle producers expire, and the table never holds more than maxIDs.
func TestProducerTableBounded(t *testing.T) {
	policy := &producerPolicy{expiration: time.Hour, maxIDs: 100}
	tbl := newProducerTable(policy)
	now := time.Now()
	view := func(pid int64) batchView {
		var v batchView
		splitBatches(idemBatch(t, pid, 0, 0, "x", now.UnixMilli()), func(b batchView) error { v = b; return nil })
		return v
	}
	for pid := range int64(10_000) {
		tbl.record(view(pid), pid, now.UnixMilli()+pid, now)
		if len(tbl.byID) > policy.maxIDs {
			t.Fatalf("%d ids held, max %d", len(tbl.byID), policy.maxIDs)
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
	tbl.record(view(1), 1, later.UnixMilli(), later)
	if len(tbl.byID) != 1 {
		t.Fatalf("%d ids after expiry, want 1", len(tbl.byID))
	}
}

// Rebuilding the table from the log skips producers that expired: a
// sequence gap from one of them is no longer refused.
func TestProducerRebuildSkipsExpired(t *testing.T) {
	p := testPartition(t, &producerPolicy{expiration: time.Hour, maxIDs: 100})
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	if _, err := p.append(idemBatch(t, 3, 0, 0, "old", old)); err != nil {
		t.Fatal(err)
	}
	p.appendMu.Lock()
	p.producers = nil // as after a restart
	p.appendMu.Unlock()
	if _, err := p.append(idemBatch(t, 3, 0, 40, "gap", time.Now().UnixMilli())); err != nil {
		t.Fatalf("producer expired before the rebuild: %v", err)
	}
}
