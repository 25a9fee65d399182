package raftfsm

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func reassign(action ReassignAction, p int32, target ...int32) Command {
	return Command{ReassignPartition: &ReassignPartition{Topic: "t", Partition: p, Action: action, Target: target}}
}

func isrOf(p int32, leaderEpoch, partitionEpoch, leader int32, isr ...int32) Command {
	return Command{ChangePartition: &ChangePartition{Topic: "t", Partition: p, LeaderEpoch: leaderEpoch,
		PartitionEpoch: partitionEpoch, Leader: leader, ISR: isr}}
}

type step struct {
	cmd Command
	err error
}

// TestReassignPartition runs each case's steps after setup plus broker 4,
// then compares partition 0 of topic "t" (replicas [1 2], leader 1).
func TestReassignPartition(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		want  Partition
	}{
		{name: "start adds and marks removal",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}},
			want: Partition{Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 4, 1}, ISR: []int32{1, 2},
				Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}}},
		{name: "start again with the same target changes nothing",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}, {cmd: reassign(ReassignStart, 0, 2, 4)}},
			want: Partition{Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 4, 1}, ISR: []int32{1, 2},
				Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}}},
		{name: "an isr change that leaves a target out of sync does not complete",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}, {cmd: isrOf(0, 0, 1, 1, 1)}},
			want: Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{2, 4, 1}, ISR: []int32{1},
				Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}}},
		{name: "the isr change that brings the last target in sync completes and moves the leader",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}, {cmd: isrOf(0, 0, 1, 1, 1, 2, 4)},
				{cmd: reassign(ReassignCancel, 0), err: ErrNoReassignment}},
			want: Partition{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{2, 4}, ISR: []int32{2, 4}}},
		{name: "completion through a batch of partition changes",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)},
				{cmd: Command{ChangePartitions: &ChangePartitions{Topic: "t", Changes: []ChangePartition{
					{Partition: 0, PartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2, 4}}}}}}},
			want: Partition{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{2, 4}, ISR: []int32{2, 4}}},
		{name: "completion keeps a leader that stays",
			steps: []step{{cmd: reassign(ReassignStart, 0, 4, 1)}, {cmd: isrOf(0, 0, 1, 1, 1, 2, 4)}},
			want:  Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{4, 1}, ISR: []int32{1, 4}}},
		{name: "a new target already in sync completes at once",
			steps: []step{{cmd: reassign(ReassignStart, 0, 3, 4)}, {cmd: isrOf(0, 0, 1, 1, 1, 2, 4)},
				{cmd: reassign(ReassignStart, 0, 2, 4)}},
			want: Partition{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{2, 4}, ISR: []int32{2, 4}}},
		{name: "cancel reverts and drops the adding replica from the isr",
			steps: []step{{cmd: reassign(ReassignStart, 0, 3, 4)}, {cmd: isrOf(0, 0, 1, 1, 1, 2, 4)},
				{cmd: reassign(ReassignCancel, 0)}, {cmd: reassign(ReassignCancel, 0), err: ErrNoReassignment}},
			want: Partition{Leader: 1, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}},
		{name: "cancel moves leadership off an adding replica",
			steps: []step{{cmd: reassign(ReassignStart, 0, 4, 3)}, {cmd: isrOf(0, 0, 1, 4, 1, 2, 4)},
				{cmd: reassign(ReassignCancel, 0)}},
			want: Partition{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}},
		{name: "a new target replaces the running one, original replicas kept",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}, {cmd: reassign(ReassignStart, 0, 3, 4)}},
			want: Partition{Leader: 1, PartitionEpoch: 2, Replicas: []int32{3, 4, 2, 1}, ISR: []int32{1, 2},
				Reassignment: &Reassignment{Adding: []int32{3, 4}, Removing: []int32{2, 1}}}},
		{name: "a reorder takes effect at once",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 1)}},
			want:  Partition{Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{1, 2}}},
		{name: "invalid targets and actions change nothing",
			steps: []step{
				{cmd: reassign(ReassignStart, 0), err: ErrInvalidAssignment},
				{cmd: reassign(ReassignStart, 0, 2, 3, 4), err: ErrInvalidAssignment},
				{cmd: reassign(ReassignStart, 0, 4, 4), err: ErrInvalidAssignment},
				{cmd: reassign(ReassignStart, 0, 2, 9), err: ErrUnknownBroker},
				{cmd: reassign(ReassignStart, 2, 2, 4), err: ErrUnknownPartition},
				{cmd: reassign("move", 0, 2, 4), err: ErrInvalidCommand},
				{cmd: Command{ReassignPartition: &ReassignPartition{Topic: "x", Action: ReassignStart, Target: []int32{1, 2}}}, err: ErrUnknownTopic},
				{cmd: reassign(ReassignCancel, 0), err: ErrNoReassignment},
			},
			want: Partition{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}},
		{name: "the leader's stale isr change is refused after a start",
			steps: []step{{cmd: reassign(ReassignStart, 0, 2, 4)}, {cmd: isrOf(0, 0, 0, 1, 1), err: ErrStaleEpoch}},
			want: Partition{Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 4, 1}, ISR: []int32{1, 2},
				Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFSM(t, t.TempDir())
			setup(t, f)
			applyAt(t, f, 5, reg(4, "d"))
			for i, s := range tt.steps {
				res := applyAt(t, f, uint64(6+i), s.cmd)
				err, _ := res.(error)
				if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
					t.Fatalf("step %d: got %v, want %v", i, res, s.err)
				}
			}
			img, _ := f.Image()
			if got := img.Topics.Get("t").Partitions[0]; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("partition 0\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestReassignmentPersists: the reassignment state is in the stored topic
// and the digest, and the topic's replication factor is the target's.
func TestReassignmentPersists(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	setup(t, f)
	applyAt(t, f, 5, reg(4, "d"))
	before, _ := f.Image()
	if res := applyAt(t, f, 6, reassign(ReassignStart, 0, 2, 4)); isErr(res) {
		t.Fatal(res)
	}
	img, _ := f.Image()
	if img.Digest() == before.Digest() {
		t.Fatal("digest ignores the reassignment")
	}
	var tp Topic
	if err := json.Unmarshal(mustJSON(img.Topics.Get("t")), &tp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tp.Partitions[0], img.Topics.Get("t").Partitions[0]) {
		t.Fatalf("stored %+v, image %+v", tp.Partitions[0], img.Topics.Get("t").Partitions[0])
	}
	if rf := TopicRF(img.Topics.Get("t")); rf != 2 {
		t.Fatalf("replication factor %d while reassigning, want 2", rf)
	}
	if res := applyAt(t, f, 7, Command{CreatePartitions: &CreatePartitions{Topic: "t", Count: 3, Assignments: [][]int32{{3, 4}}}}); isErr(res) {
		t.Fatal(res)
	}
}
