package broker

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"

	"github.com/runnel/runnel/recordbatch"
)

// A produce that found this broker leader, and then met a metadata change
// moving the leadership away before it appended (a controlled shutdown
// moves it while requests are in flight), was appended stamped with the
// new leader's epoch: the old leader's log then held batches of the new
// epoch that the new leader never wrote, which no epoch comparison can
// find. Replicas kept different records at the same offsets under the same
// epochs, or the old leader, now a follower, fetched a batch starting below
// its log end forever and never rejoined the ISR (the rolling-restart chaos
// failure, issue 20). The append must be refused, or stamped with the
// epoch under which this broker led.
func TestAppendRacingLeadershipMove(t *testing.T) {
	a, b := epochTestPartition(t, 1), epochTestPartition(t, 2)
	lead(t, a, 10, "e10", 3)
	follow(b, 1, 10)
	replicate(t, a, b)

	// The produce passes its checks on a; before it appends, a applies the
	// image in which b leads at epoch 11 (the lease check is the hook).
	var once sync.Once
	a.leaseValid = func(time.Time) bool {
		once.Do(func() { follow(a, 2, 11) })
		return true
	}
	_, err := a.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("late"), Timestamp: 1}}))
	a.leaseValid = nil
	if err != nil && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append racing the move: %v", err)
	}
	if got := batchEpochs(t, a); slices.Contains(got, 11) {
		t.Fatalf("a, no longer leader, wrote a batch of epoch 11, the new leader's: epochs %v", got)
	}

	// b leads at 11 and writes; a follows it and must end identical.
	b.setMeta(raftfsm.Partition{Leader: 2, LeaderEpoch: 11, Replicas: []int32{1, 2}, ISR: []int32{2}}, 2)
	for _, v := range []string{"e11-0", "e11-1"} {
		if _, err := b.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(v), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	replicate(t, b, a)
	if !bytes.Equal(logBytes(t, a), logBytes(t, b)) {
		t.Fatalf("the old leader's log differs from the new leader's: epochs %v vs %v", batchEpochs(t, a), batchEpochs(t, b))
	}
}
