package admin

import (
	"errors"
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker"
)

// TestElectionsAsked: the outcome of each partition of an ElectLeaders
// request, preferred and unclean, with Kafka's errors.
func TestElectionsAsked(t *testing.T) {
	brokers := func(alive ...int32) map[int32]*raftfsm.Broker {
		m := map[int32]*raftfsm.Broker{}
		for _, id := range []int32{1, 2, 3} {
			m[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerFenced}
		}
		for _, id := range alive {
			m[id].State = raftfsm.BrokerAlive
		}
		return m
	}
	part := func(leader int32, isr ...int32) raftfsm.Partition {
		return raftfsm.Partition{Leader: leader, Replicas: []int32{1, 2, 3}, ISR: isr, LeaderEpoch: 4, PartitionEpoch: 9}
	}
	for _, tc := range []struct {
		name       string
		mode       ElectionMode
		brokers    map[int32]*raftfsm.Broker
		p          raftfsm.Partition
		unclean    bool
		wantLeader int32 // -1: no change
		wantErr    error
	}{
		{"preferred leads", ElectPreferred, brokers(1, 2, 3), part(1, 1, 2, 3), false, -1, ErrElectionNotNeeded},
		{"preferred back", ElectPreferred, brokers(1, 2, 3), part(2, 1, 2, 3), false, 1, nil},
		{"preferred out of sync", ElectPreferred, brokers(1, 2, 3), part(2, 2, 3), false, -1, ErrPreferredLeaderNotAvailable},
		{"preferred fenced", ElectPreferred, brokers(2, 3), part(2, 1, 2, 3), false, -1, ErrPreferredLeaderNotAvailable},
		{"unclean, has a leader", ElectUnclean, brokers(1, 2, 3), part(2, 2), true, -1, ErrElectionNotNeeded},
		{"unclean, in-sync replica alive", ElectUnclean, brokers(2, 3), part(-1, 1, 2), false, 2, nil},
		{"unclean, topic forbids", ElectUnclean, brokers(3), part(-1, 1), false, -1, ErrEligibleLeadersNotAvailable},
		{"unclean, topic allows", ElectUnclean, brokers(3), part(-1, 1), true, 3, nil},
		{"unclean, nobody alive", ElectUnclean, brokers(), part(-1, 1), true, -1, ErrEligibleLeadersNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := &raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{tc.p}, Configs: map[string]string{}}
			if tc.unclean {
				topic.Configs["unclean.leader.election.enable"] = "true"
			}
			img := &raftfsm.Image{Brokers: tc.brokers, Topics: raftfsm.TopicMapOf(topic)}
			changes, results := elections(img, topic, []int32{0, 5}, tc.mode)
			if err := results[0]; !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("partition 0: %v, want %v", err, tc.wantErr)
			}
			if !errors.Is(results[5], broker.ErrUnknownPartition) {
				t.Fatalf("partition 5: %v, want unknown", results[5])
			}
			switch {
			case tc.wantLeader < 0 && len(changes) != 0:
				t.Fatalf("unexpected change %+v", changes)
			case tc.wantLeader >= 0 && (len(changes) != 1 || changes[0].Leader != tc.wantLeader ||
				changes[0].LeaderEpoch != 4 || changes[0].PartitionEpoch != 9):
				t.Fatalf("changes %+v, want leader %d at the current epochs", changes, tc.wantLeader)
			}
		})
	}
}
