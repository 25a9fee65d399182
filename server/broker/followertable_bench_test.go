package broker

import (
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// BenchmarkLeaderFollowers is what a partition's followers cost a leader at
// scale (issue 19): making it leader of three replicas (the table of its
// two followers: allocations and bytes a led partition keeps for the
// collector to trace), then a fetch of each follower and an ISR check,
// which look the followers up.
func BenchmarkLeaderFollowers(b *testing.B) {
	meta := raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	p := newPartition("t", 0, [16]byte{1}, nil, nil)
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		meta.LeaderEpoch = int32(i + 1)
		p.setMeta(meta, 1)
		_ = p.FollowerFetched(2, 0, meta.LeaderEpoch)
		_ = p.FollowerFetched(3, 0, meta.LeaderEpoch)
		p.isrChangeWanted(now, 30*time.Second)
	}
}
