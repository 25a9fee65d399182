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
	for _, tc := range []struct {
		name       string
		mode       ElectionMode
		brokers    map[int32]*raftfsm.Broker
		p          raftfsm.Partition
		unclean    bool
		wantLeader int32 // -1: no change
		wantErr    error
	}{
		{"preferred leads", ElectPreferred, threeBrokers(1, 2, 3), onThree(1, 1, 2, 3), false, -1, ErrElectionNotNeeded},
		{"preferred back", ElectPreferred, threeBrokers(1, 2, 3), onThree(2, 1, 2, 3), false, 1, nil},
		{"preferred out of sync", ElectPreferred, threeBrokers(1, 2, 3), onThree(2, 2, 3), false, -1, ErrPreferredLeaderNotAvailable},
		{"preferred fenced", ElectPreferred, threeBrokers(2, 3), onThree(2, 1, 2, 3), false, -1, ErrPreferredLeaderNotAvailable},
		{"unclean, has a leader", ElectUnclean, threeBrokers(1, 2, 3), onThree(2, 2), true, -1, ErrElectionNotNeeded},
		{"unclean, in-sync replica alive", ElectUnclean, threeBrokers(2, 3), onThree(-1, 1, 2), false, 2, nil},
		{"unclean, topic forbids", ElectUnclean, threeBrokers(3), onThree(-1, 1), false, -1, ErrEligibleLeadersNotAvailable},
		{"unclean, topic allows", ElectUnclean, threeBrokers(3), onThree(-1, 1), true, 3, nil},
		{"unclean, nobody alive", ElectUnclean, threeBrokers(), onThree(-1, 1), true, -1, ErrEligibleLeadersNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, topic := oneTopic(tc.brokers, tc.p, tc.unclean)
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
