package raftfsm

import (
	"errors"
	"testing"
)

// KIP-841: the ISR may only grow by brokers that are alive. A leader that
// still sees a fenced (or shutting-down) follower fetching cannot put it
// back, so acks=all does not wait for a broker the controller gave up on.
func TestISRExpansionOnlyToAliveBrokers(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	setup(t, f) // brokers 1..3 (epochs 1..3), "t" partition 0 on {1,2}
	if res := applyAt(t, f, 5, Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1}}}); isErr(res) {
		t.Fatalf("shrink: %v", res)
	}
	if res := applyAt(t, f, 6, Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 2, State: BrokerFenced}}); isErr(res) {
		t.Fatalf("fence: %v", res)
	}
	res := applyAt(t, f, 7, Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, PartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2}}})
	if err, ok := res.(error); !ok || !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("ISR expanded to a fenced broker: %v", res)
	}
	// The batch form skips it too.
	if n := applyAt(t, f, 8, Command{ChangePartitions: &ChangePartitions{Topic: "t", Changes: []ChangePartition{
		{Partition: 0, PartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2}}}}}); n != int64(0) {
		t.Fatalf("batch applied %v changes adding a fenced broker", n)
	}
	if res := applyAt(t, f, 9, Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 2, State: BrokerShuttingDown}}); isErr(res) {
		t.Fatalf("shutting down: %v", res)
	}
	res = applyAt(t, f, 10, Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, PartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2}}})
	if err, ok := res.(error); !ok || !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("ISR expanded to a shutting-down broker: %v", res)
	}
	if res := applyAt(t, f, 11, Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 2, State: BrokerAlive}}); isErr(res) {
		t.Fatalf("unfence: %v", res)
	}
	if res := applyAt(t, f, 12, Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, PartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2}}}); isErr(res) {
		t.Fatalf("ISR expansion to an alive broker refused: %v", res)
	}
}
