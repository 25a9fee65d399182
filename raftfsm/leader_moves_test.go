package raftfsm

import (
	"fmt"
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

// BenchmarkChangePartitions applies the leader moves of a controlled
// shutdown to one topic of 10,000 partitions (replication factor 2 over 3
// brokers): broker 2's third of the leaderships move to the other replica
// in one command, as the controller batches them. The handler's cost
// (copying the topic, counting, encoding its state) without raft's decoding.
// BenchmarkApplyLeaderMoves adds the decoding.
func BenchmarkChangePartitions(b *testing.B) {
	base, cmd := shutdownMoves(1)
	for b.Loop() {
		c := &change{img: base.next(2), index: 2}
		if n, err := c.changePartitions(&cmd.Topics[0]); err != nil || n != int64(len(cmd.Topics[0].Changes)) {
			b.Fatalf("applied %v, %v", n, err)
		}
	}
}

// BenchmarkApplyLeaderMoves decodes and applies one ChangePartitionsBatch
// of a controlled shutdown: broker 2's leaderships in three topics of
// 10,000 partitions (what the controller packs into one raft entry; a
// shutdown at 2,000,000 partitions is about 70 of them, applied by every
// controller), without badger's commit.
func BenchmarkApplyLeaderMoves(b *testing.B) {
	base, cmd := shutdownMoves(3)
	data, err := EncodeCommand(Command{Version: CommandVersion, ChangePartitionsBatch: cmd})
	if err != nil {
		b.Fatal(err)
	}
	want := int64(0)
	for _, t := range cmd.Topics {
		want += int64(len(t.Changes))
	}
	for b.Loop() {
		dec, err := DecodeCommand(data)
		if err != nil {
			b.Fatal(err)
		}
		c := &change{img: base.next(2), index: 2}
		if n := c.applyAt(2, dec); n != want {
			b.Fatalf("applied %v, want %d", n, want)
		}
	}
}

// shutdownMoves is an image of topics of 10,000 partitions (replication
// factor 2 over 3 brokers, topics stored in binary) with broker 2 shutting
// down, and the batch that moves its leaderships to the other replica.
func shutdownMoves(topics int) (*Image, *ChangePartitionsBatch) {
	base := emptyImage()
	for id := int32(1); id <= 3; id++ {
		base.Brokers[id] = &Broker{ID: id, State: BrokerAlive}
	}
	base.Brokers[2].State = BrokerShuttingDown
	base.CommandVersion = CommandVersion
	batch := &ChangePartitionsBatch{}
	for i := range topics {
		tp := &Topic{Name: fmt.Sprintf("t%d", i), Configs: map[string]string{}}
		cmd := ChangePartitions{Topic: tp.Name}
		for p := range 10_000 {
			reps := []int32{int32(p%3 + 1), int32((p+1)%3 + 1)}
			tp.Partitions = append(tp.Partitions, Partition{Leader: reps[0], Replicas: reps, ISR: slices.Clone(reps)})
			if reps[0] == 2 {
				cmd.Changes = append(cmd.Changes, ChangePartition{Partition: int32(p), Leader: reps[1], ISR: []int32{reps[1]}})
			}
		}
		base.Topics = base.Topics.With(tp)
		batch.Topics = append(batch.Topics, cmd)
	}
	base.load = scanLoad(base)
	return base, batch
}
