package broker

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
	"github.com/runnel/runnel/server/broker/producers"
)

// idemBatch is one record under producer pid, epoch and sequence seq.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, value string, ts int64) []byte {
	t.Helper()
	raw := recordbatch.Build([]recordbatch.NewRecord{{Timestamp: ts, Value: []byte(value)}})
	binary.BigEndian.PutUint64(raw[43:], uint64(pid))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(seq))
	recordbatch.SetCRC(raw)
	return raw
}

func testPartition(t *testing.T, policy *producers.Policy) *Partition {
	t.Helper()
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	p.producerPolicy = policy
	setLeader(p, 0, 0)
	t.Cleanup(func() { p.close() })
	return p
}

// setLeader sets the partition's leader and epoch as an image would, for
// tests that append without the rest of the metadata.
func setLeader(p *Partition, leader, epoch int32) {
	p.leader.Store(leader)
	p.leaderEpoch.Store(epoch)
	p.term.Store(packTerm(leader, epoch))
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
	if _, err := p.append(idemBatch(t, 7, 0, 1, "mine-1", now)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("same sequence, other records: %v, want out of order", err)
	}
	// A true retry (same records, even with a new header timestamp) is a
	// duplicate.
	res, err := p.append(idemBatch(t, 7, 0, 1, "other-1", now+5))
	if err != nil || !res.Duplicate || res.BaseOffset != other.BaseOffset {
		t.Fatalf("retry: %+v %v, want duplicate at %d", res, err, other.BaseOffset)
	}
}

// Ids at or above the controller's allocation mark are refused once the
// metadata had its chance to catch up; allocated ids pass.
func TestProducerIDMustBeAllocated(t *testing.T) {
	never := make(chan struct{})
	p := testPartition(t, &producers.Policy{Expiration: time.Hour, MaxIDs: 10,
		Allocated: func() (int64, <-chan struct{}) { return 100, never }})
	now := time.Now().UnixMilli()
	if _, err := p.append(idemBatch(t, 99, 0, 0, "ok", now)); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		return // the refusal waits producerIDWait for the metadata
	}
	if _, err := p.append(idemBatch(t, 100, 0, 0, "forged", now)); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("unallocated id: %v, want unknown producer id", err)
	}
}

// Rebuilding the table from the log skips producers that expired: a
// sequence gap from one of them is no longer refused.
func TestProducerRebuildSkipsExpired(t *testing.T) {
	p := testPartition(t, &producers.Policy{Expiration: time.Hour, MaxIDs: 100})
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	if _, err := p.append(idemBatch(t, 3, 0, 0, "old", old)); err != nil {
		t.Fatal(err)
	}
	p.appendMu.Lock()
	p.producers.Reset() // as after a restart
	p.appendMu.Unlock()
	if _, err := p.append(idemBatch(t, 3, 0, 40, "gap", time.Now().UnixMilli())); err != nil {
		t.Fatalf("producer expired before the rebuild: %v", err)
	}
}

// After storage recovery the producer table is rebuilt from the log. An
// append whose batch reached the file but whose fsync failed was answered
// with an error and left the table as it was; recovery keeps the batch (it
// is whole and rewritten durably), so the producer's retry must be
// acknowledged as the duplicate it is, at the batch's offset, not written a
// second time.
func TestProducerStateRebuiltAfterStorageRecovery(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.OSFS(), nil)
	cfg := segments.DefaultConfig()
	cfg.FlushMessages = 1 // fsync before acknowledging each append
	log, err := segments.Open(t.TempDir(), cfg, segments.Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	setLeader(p, 0, 0)
	t.Cleanup(func() { p.close() })
	now := time.Now().UnixMilli()
	if _, err := p.append(idemBatch(t, 7, 0, 0, "v0", now)); err != nil {
		t.Fatal(err)
	}
	efs.SetInjector(vfs.FailAfter(vfs.OpSync, 0, syscall.EIO))
	if _, err := p.append(idemBatch(t, 7, 0, 1, "v1", now)); err == nil {
		t.Fatal("append with a failing fsync succeeded")
	}
	efs.SetInjector(nil)
	if err := p.log().Recover(); err != nil {
		t.Fatal(err)
	}
	p.recovered()
	if end := p.log().EndOffset(); end != 2 {
		t.Fatalf("log end %d after recovery, want 2 (the unsynced batch kept)", end)
	}
	res, err := p.append(idemBatch(t, 7, 0, 1, "v1", now))
	if err != nil || !res.Duplicate || res.BaseOffset != 1 || p.log().EndOffset() != 2 {
		t.Fatalf("retry after recovery: %+v %v (log end %d), want the duplicate at offset 1", res, err, p.log().EndOffset())
	}
}
