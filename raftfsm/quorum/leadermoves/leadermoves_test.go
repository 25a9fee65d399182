package leadermoves

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// maxCommandBytes is package quorum's bound on one encoded command.
const maxCommandBytes = 1 << 20

// Where leadership goes, with the brokers' ids all small, all large (the
// view's map rather than its slice) and mixed.
func TestLeaderMoves(t *testing.T) {
	for _, big := range [][]int32{nil, {1, 2, 3, 4, 9}, {4, 9}} {
		id := func(k int32) int32 {
			if slices.Contains(big, k) {
				return denseIDs + k
			}
			return k
		}
		ids := func(ks ...int32) []int32 {
			out := make([]int32, len(ks))
			for i, k := range ks {
				out[i] = id(k)
			}
			return out
		}
		img := emptyImage()
		for k, st := range map[int32]raftfsm.BrokerState{1: raftfsm.BrokerAlive, 2: raftfsm.BrokerFenced, 3: raftfsm.BrokerShuttingDown, 4: raftfsm.BrokerAlive} {
			img.Brokers[id(k)] = &raftfsm.Broker{ID: id(k), State: st}
		}
		img.Topics = img.Topics.With(&raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{
			{Leader: id(1), Replicas: ids(1, 2), ISR: ids(1, 2)},                       // alive leader: kept, fenced 2 leaves the ISR
			{Leader: id(2), LeaderEpoch: 3, Replicas: ids(2, 4, 1), ISR: ids(2, 1, 4)}, // fenced: to 4, the first alive replica
			{Leader: id(2), PartitionEpoch: 5, Replicas: ids(2, 3), ISR: ids(2, 3)},    // fenced, no alive candidate: offline
			{Leader: id(3), Replicas: ids(3, 2), ISR: ids(3, 2)},                       // shutting down, no candidate: kept
			{Leader: id(3), Replicas: ids(3, 1), ISR: ids(3, 1)},                       // shutting down: to 1
			{Leader: -1, Replicas: ids(2, 1), ISR: ids(1)},                             // offline, 1 alive: led again
			{Leader: -1, Replicas: ids(2), ISR: ids(2)},                                // offline, none: kept
			{Leader: id(9), Replicas: ids(9, 1), ISR: ids(9)},                          // unknown broker, no candidate: offline
			{Leader: id(4), Replicas: ids(4, 1), ISR: ids(4, 1)},                       // alive, in sync: kept
		}})
		want := []raftfsm.ChangePartition{
			{Partition: 0, Leader: id(1), ISR: ids(1)},
			{Partition: 1, LeaderEpoch: 3, Leader: id(4), ISR: ids(1, 4)},
			{Partition: 2, PartitionEpoch: 5, Leader: -1, ISR: ids(2, 3)},
			{Partition: 4, Leader: id(1), ISR: ids(1)},
			{Partition: 5, Leader: id(1), ISR: ids(1)},
			{Partition: 7, Leader: -1, ISR: ids(9)},
		}
		cmds := Plan(img, nil)
		if len(cmds) != 1 || cmds[0].ChangePartitions.Topic != "t" || !reflect.DeepEqual(cmds[0].ChangePartitions.Changes, want) {
			t.Fatalf("large ids %v: moves %+v", big, cmds)
		}
		if got := Movable(img, id(3)); got != 1 {
			t.Fatalf("large ids %v: broker 3 could hand %d leaderships over, want 1", big, got)
		}
	}
}

func TestLeaderMovesChunked(t *testing.T) {
	img := emptyImage()
	img.Brokers[1] = &raftfsm.Broker{ID: 1, State: raftfsm.BrokerAlive}
	ps := make([]raftfsm.Partition, MaxPerCommand+1)
	for i := range ps {
		ps[i] = raftfsm.Partition{Leader: -1, Replicas: []int32{1}, ISR: []int32{1}}
	}
	img.Topics = img.Topics.With(&raftfsm.Topic{Name: "big", Partitions: ps})
	cmds := Plan(img, nil)
	if len(cmds) != 2 || len(cmds[1].ChangePartitions.Changes) != 1 || cmds[1].ChangePartitions.Changes[0].Partition != MaxPerCommand {
		t.Fatalf("%d commands", len(cmds))
	}
	data, err := raftfsm.EncodeCommand(raftfsm.Command{Version: raftfsm.CommandVersion, ChangePartitions: cmds[0].ChangePartitions})
	if err != nil || len(data) > maxCommandBytes {
		t.Fatalf("a full command encodes to %d bytes (%v), limit %d", len(data), err, maxCommandBytes)
	}
}

// A broker whose storage fails (its heartbeats report the error) gives up
// leadership where another alive ISR member can take it and leaves the
// other partitions' ISRs; where nobody else can lead it keeps leading
// (issue 20, item 5: a node on a full disk stayed leader answering errors
// and stayed in ISRs, holding high watermarks back).
func TestLeaderMovesAwayFromSickBroker(t *testing.T) {
	img := emptyImage()
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerAlive}
	}
	img.Topics = img.Topics.With(&raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{
		{Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 1, 3}, ISR: []int32{2, 1, 3}}, // sick leader: to 1, 2 leaves
		{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},                       // sick follower leaves the ISR
		{Leader: 2, Replicas: []int32{2, 3}, ISR: []int32{2}},                          // nobody else in sync: kept
		{Leader: -1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}},                      // offline: the healthy one first
		{Leader: -1, Replicas: []int32{2}, ISR: []int32{2}},                            // offline, only the sick one: better than none
	}})
	want := []raftfsm.ChangePartition{
		{Partition: 0, LeaderEpoch: 4, Leader: 1, ISR: []int32{1, 3}},
		{Partition: 1, Leader: 1, ISR: []int32{1}},
		{Partition: 3, Leader: 3, ISR: []int32{3}},
		{Partition: 4, Leader: 2, ISR: []int32{2}},
	}
	cmds := Plan(img, map[int32]bool{2: true})
	if len(cmds) != 1 || !reflect.DeepEqual(cmds[0].ChangePartitions.Changes, want) {
		t.Fatalf("moves %+v", cmds[0].ChangePartitions.Changes)
	}
	if cmds := Plan(img, nil); len(cmds) != 1 || len(cmds[0].ChangePartitions.Changes) != 2 {
		t.Fatalf("healthy: moves %+v", cmds)
	}
}

// emptyImage is an image with no metadata and its maps allocated.
func emptyImage() *raftfsm.Image {
	return &raftfsm.Image{Brokers: map[int32]*raftfsm.Broker{}, Users: map[string]*raftfsm.User{}, ACLs: map[string]raftfsm.ACLEntry{}, Tokens: map[string]*raftfsm.Token{}, Quotas: map[string]raftfsm.Quota{}}
}

// BenchmarkPlan plans the moves of a controlled shutdown (broker 2 of 3
// shutting down, leading a third of 200,000 partitions of replication
// factor 2 in topics of 10,000: the leader's serial part of a shutdown,
// 0.96 s at 2,000,000 in BenchmarkControllerScale) and, as nothing, the
// controller loop's periodic look with every broker alive.
func BenchmarkPlan(b *testing.B) {
	img := emptyImage()
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerAlive}
	}
	for t := range 20 {
		ps := make([]raftfsm.Partition, 10_000)
		for p := range ps {
			reps := []int32{int32(p%3 + 1), int32((p+1)%3 + 1)}
			ps[p] = raftfsm.Partition{Leader: reps[0], Replicas: reps, ISR: []int32{reps[0], reps[1]}}
		}
		img.Topics = img.Topics.With(&raftfsm.Topic{Name: fmt.Sprintf("t%02d", t), Partitions: ps})
	}
	b.Run("all-alive", func(b *testing.B) {
		for b.Loop() {
			if cmds := Plan(img, nil); len(cmds) != 0 {
				b.Fatalf("%d commands", len(cmds))
			}
		}
	})
	shutdown := *img
	shutdown.Brokers = maps.Clone(img.Brokers)
	shutdown.Brokers[2] = &raftfsm.Broker{ID: 2, State: raftfsm.BrokerShuttingDown}
	led := Movable(&shutdown, 2)
	b.Run("shutdown", func(b *testing.B) {
		for b.Loop() {
			moved := 0
			for _, c := range Plan(&shutdown, nil) {
				moved += len(c.ChangePartitions.Changes)
			}
			if moved != led {
				b.Fatalf("%d moves", moved)
			}
		}
	})
}
