package admin

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

func TestLeaderChanges(t *testing.T) {
	alive := func(ids ...int32) map[int32]*raftfsm.Broker {
		m := map[int32]*raftfsm.Broker{}
		for _, id := range []int32{1, 2, 3} {
			m[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerFenced}
		}
		for _, id := range ids {
			m[id].State = raftfsm.BrokerAlive
		}
		return m
	}
	part := func(leader int32, isr ...int32) raftfsm.Partition {
		return raftfsm.Partition{Leader: leader, Replicas: []int32{1, 2, 3}, ISR: isr, LeaderEpoch: 4, PartitionEpoch: 9}
	}
	for _, tc := range []struct {
		name       string
		brokers    map[int32]*raftfsm.Broker
		p          raftfsm.Partition
		unclean    bool
		wantLeader int32 // -2: no change
		wantISR    []int32
	}{
		{"preferred leads already", alive(1, 2, 3), part(1, 1, 2, 3), false, -2, nil},
		{"preferred back in sync", alive(1, 2, 3), part(2, 1, 2, 3), false, 1, []int32{1, 2, 3}},
		{"preferred alive, not in sync", alive(1, 2, 3), part(2, 2, 3), false, -2, nil},
		{"preferred fenced", alive(2, 3), part(2, 1, 2, 3), false, -2, nil},
		{"offline, clean only", alive(3), part(-1, 1), false, -2, nil},
		{"offline, unclean allowed", alive(3), part(-1, 1), true, 3, []int32{3}},
		{"offline, ISR member alive again", alive(1, 3), part(-1, 1), true, 1, []int32{1}},
		{"offline, nobody alive", alive(), part(-1, 1), true, -2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := &raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{tc.p}, Configs: map[string]string{}}
			if tc.unclean {
				topic.Configs["unclean.leader.election.enable"] = "true"
			}
			img := &raftfsm.Image{Brokers: tc.brokers, Topics: raftfsm.TopicMapOf(topic)}
			got := leaderChanges(img, topic)
			if tc.wantLeader == -2 {
				if len(got) != 0 {
					t.Fatalf("unexpected change %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Leader != tc.wantLeader || fmtIDs(got[0].ISR) != fmtIDs(tc.wantISR) ||
				got[0].LeaderEpoch != 4 || got[0].PartitionEpoch != 9 {
				t.Fatalf("got %+v, want leader %d isr %v at the current epochs", got, tc.wantLeader, tc.wantISR)
			}
		})
	}
}

func fmtIDs(ids []int32) string {
	s := ""
	for _, id := range ids {
		s += string(rune('0' + id))
	}
	return s
}
