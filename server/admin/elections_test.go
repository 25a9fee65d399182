package admin

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

func TestLeaderChanges(t *testing.T) {
	for _, tc := range []struct {
		name       string
		brokers    map[int32]*raftfsm.Broker
		p          raftfsm.Partition
		unclean    bool
		wantLeader int32 // -2: no change
		wantISR    []int32
	}{
		{"preferred leads already", threeBrokers(1, 2, 3), onThree(1, 1, 2, 3), false, -2, nil},
		{"preferred back in sync", threeBrokers(1, 2, 3), onThree(2, 1, 2, 3), false, 1, []int32{1, 2, 3}},
		{"preferred alive, not in sync", threeBrokers(1, 2, 3), onThree(2, 2, 3), false, -2, nil},
		{"preferred fenced", threeBrokers(2, 3), onThree(2, 1, 2, 3), false, -2, nil},
		{"offline, clean only", threeBrokers(3), onThree(-1, 1), false, -2, nil},
		{"offline, unclean allowed", threeBrokers(3), onThree(-1, 1), true, 3, []int32{3}},
		{"offline, ISR member alive again", threeBrokers(1, 3), onThree(-1, 1), true, 1, []int32{1}},
		{"offline, nobody alive", threeBrokers(), onThree(-1, 1), true, -2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, topic := oneTopic(tc.brokers, tc.p, tc.unclean)
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
