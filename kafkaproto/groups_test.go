package kafkaproto

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSweepKeys are the group APIs. Their every-version sweep against the
// real coordinator is server/e2e_groups_test.go (TestGroupAPIsEveryVersion);
// here a broker without a GroupCoordinator must answer each of them at
// every version with COORDINATOR_NOT_AVAILABLE (or, for the listing APIs,
// an empty answer) rather than drop the connection.
var groupSweepKeys = []int16{int16(kmsg.FindCoordinator), int16(kmsg.JoinGroup), int16(kmsg.SyncGroup), int16(kmsg.Heartbeat), int16(kmsg.LeaveGroup),
	int16(kmsg.OffsetCommit), int16(kmsg.OffsetFetch), int16(kmsg.ListGroups), int16(kmsg.DescribeGroups), int16(kmsg.DeleteGroups), int16(kmsg.OffsetDelete)}

// groupSweepRequest returns a valid request of a group API key at version v
// for group g.
func groupSweepRequest(key, v int16, g string) kmsg.Request {
	switch key {
	case int16(kmsg.FindCoordinator):
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = g, []string{g}
		return r
	case int16(kmsg.JoinGroup):
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = g, 10000, 10000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		r.Protocols = append(r.Protocols, p)
		return r
	case int16(kmsg.SyncGroup):
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = g, 1, "m"
		return r
	case int16(kmsg.Heartbeat):
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID = g, 1, "m"
		return r
	case int16(kmsg.LeaveGroup):
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID = g, "m"
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = "m"
		r.Members = append(r.Members, m)
		return r
	case int16(kmsg.OffsetCommit):
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = g, -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = "sweep"
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = 0, 1, -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.OffsetFetch):
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = g
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = "sweep", []int32{0}
		r.Topics = append(r.Topics, t)
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		r.Groups = append(r.Groups, rg)
		return r
	case int16(kmsg.ListGroups):
		return kmsg.NewPtrListGroupsRequest()
	case int16(kmsg.DescribeGroups):
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{g}
		return r
	case int16(kmsg.DeleteGroups):
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{g}
		return r
	case int16(kmsg.OffsetDelete):
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = g
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = "sweep"
		t.Partitions = append(t.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}
	panic(fmt.Sprintf("no group sweep request for key %d", key))
}

func TestGroupAPIsWithoutCoordinator(t *testing.T) {
	b := newMemBroker()
	addr, s := startServer(t, b, Options{})
	mustCreate(t, b, "sweep", 1)
	c := dial(t, addr)
	for _, key := range groupSweepKeys {
		h := s.handlers[key]
		for v := h.Min; v <= h.Max; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := groupSweepRequest(key, v, "g")
				req.SetVersion(v)
				resp := roundTrip(t, c, req)
				codes := errorCodes(resp)
				if key == int16(kmsg.ListGroups) {
					if len(codes) != 0 {
						t.Fatalf("list groups: codes %v", codes)
					}
					return
				}
				if len(codes) == 0 {
					t.Fatalf("no error code in %+v", resp)
				}
				for _, c := range codes {
					if c != kerr.CoordinatorNotAvailable.Code {
						t.Fatalf("code %d, want COORDINATOR_NOT_AVAILABLE", c)
					}
				}
			})
		}
	}
}
