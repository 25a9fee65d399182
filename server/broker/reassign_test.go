package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
)

// A leader whose replica set changes without a leadership change (a
// reassignment starts or is cancelled) tracks the added follower, which can
// then join the ISR, and forgets a dropped one.
func TestLeaderTracksReassignedFollowers(t *testing.T) {
	log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	t.Cleanup(func() { p.close() })
	steps := []struct {
		name    string
		meta    raftfsm.Partition
		fetched []int32 // followers that fetch up to the log end
		wantISR []int32 // nil: no ISR change wanted
	}{
		{name: "created", meta: raftfsm.Partition{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			fetched: []int32{2, 3}},
		{name: "reassignment to 2,3,4 started",
			meta: raftfsm.Partition{Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 3, 4, 1}, ISR: []int32{1, 2, 3},
				Reassignment: &raftfsm.Reassignment{Adding: []int32{4}, Removing: []int32{1}}},
			fetched: []int32{2, 3, 4}, wantISR: []int32{1, 2, 3, 4}},
		{name: "cancelled before 4 joined",
			meta:    raftfsm.Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2, 3}},
			fetched: []int32{2, 3, 4}},
	}
	for _, s := range steps {
		p.setMeta(s.meta, 1)
		for _, r := range s.fetched {
			p.FollowerFetched(r, p.log().EndOffset(), -1)
		}
		isr, epoch, ok := p.wantedISR(time.Now(), time.Minute)
		if ok != (s.wantISR != nil) || (ok && (!slices.Equal(isr, s.wantISR) || epoch != s.meta.PartitionEpoch)) {
			t.Fatalf("%s: wanted isr %v at epoch %d (change %v), want %v", s.name, isr, epoch, ok, s.wantISR)
		}
		p.repl.mu.Lock()
		n := len(p.repl.followers)
		p.repl.mu.Unlock()
		if n != len(s.meta.Replicas)-1 {
			t.Fatalf("%s: leader tracks %d followers for replicas %v", s.name, n, s.meta.Replicas)
		}
	}
}
