package raftfsm

import (
	"slices"
	"testing"
)

// A batch of leader moves changes only the partitions it names: the image
// published before it keeps its partitions (the new topic copies the
// partition structs, sharing replica lists that are replaced, never
// modified), the counts move by the changed partitions (checkLoad), and a
// partition changed twice in one command counts once.
func TestChangePartitionsLeavesThePreviousImage(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	setup(t, f) // brokers 1..3, "t": partition 0 on {1,2}, 1 on {2,3}
	before, _ := f.Image()
	p0 := before.Topics.Get("t").Partitions[0].clone()
	p1 := before.Topics.Get("t").Partitions[1].clone()
	res := applyAt(t, f, 5, Command{ChangePartitions: &ChangePartitions{Topic: "t", Changes: []ChangePartition{
		{Partition: 0, Leader: 2, ISR: []int32{2}},
		{Partition: 0, LeaderEpoch: 1, PartitionEpoch: 1, Leader: 2, ISR: []int32{2, 1}}, // the same partition again
	}}})
	if res != int64(2) {
		t.Fatalf("applied %v, want 2", res)
	}
	old := before.Topics.Get("t").Partitions
	if !equalPartition(old[0], p0) || !equalPartition(old[1], p1) {
		t.Fatalf("the previous image changed: %+v, want %+v %+v", old, p0, p1)
	}
	after, _ := f.Image()
	got := after.Topics.Get("t").Partitions
	if got[0].Leader != 2 || got[0].LeaderEpoch != 1 || got[0].PartitionEpoch != 2 || !slices.Equal(got[0].ISR, []int32{2, 1}) {
		t.Fatalf("t/0 after the moves: %+v", got[0])
	}
	if !equalPartition(got[1], p1) {
		t.Fatalf("t/1 changed: %+v", got[1])
	}
}

func equalPartition(a, b Partition) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}
