package server_test

// End-to-end tests of the group APIs on the wire (raw requests).

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupAPIsEveryVersion drives one member through the whole classic
// protocol over a raw connection once per version: each group API is used
// at every version it advertises (versions clamped to its range), and the
// error codes Kafka gives for stale generations and unknown members are
// checked.
func TestGroupAPIsEveryVersion(t *testing.T) {
	n := kafkaNode(t)
	httpCreateTopic(t, n, "gsweep", 2)
	clamp := func(v, lo, hi int16) int16 { return min(max(v, lo), hi) }
	for v := int16(0); v <= 9; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c := rawDial(t, n.KafkaAddr)
			group := fmt.Sprintf("sweep-%d", v)
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.SetVersion(clamp(v, 0, 4))
			fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
			fr := rawRoundTrip(t, c, fc).(*kmsg.FindCoordinatorResponse)
			node, code := fr.NodeID, fr.ErrorCode
			if fc.Version >= 4 {
				node, code = fr.Coordinators[0].NodeID, fr.Coordinators[0].ErrorCode
			}
			if code != 0 || node != 1 {
				t.Fatalf("find coordinator: node %d code %d", node, code)
			}

			join := kmsg.NewPtrJoinGroupRequest()
			join.SetVersion(v)
			join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group, 10000, 10000, "consumer"
			meta := kmsg.NewConsumerMemberMetadata()
			meta.Topics = []string{"gsweep"}
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", meta.AppendTo(nil)
			join.Protocols = append(join.Protocols, p)
			jr := rawRoundTrip(t, c, join).(*kmsg.JoinGroupResponse)
			if v >= 4 {
				if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
					t.Fatalf("join v%d without member id: code %d member %q", v, jr.ErrorCode, jr.MemberID)
				}
				join.MemberID = jr.MemberID
				jr = rawRoundTrip(t, c, join).(*kmsg.JoinGroupResponse)
			}
			if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || *jr.Protocol != "range" {
				t.Fatalf("join: %+v", jr)
			}
			member := jr.MemberID

			sync := kmsg.NewPtrSyncGroupRequest()
			sync.SetVersion(clamp(v, 0, 5))
			sync.Group, sync.Generation, sync.MemberID = group, 1, member
			if sync.Version >= 5 {
				sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			}
			asg := kmsg.NewConsumerMemberAssignment()
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = "gsweep", []int32{0, 1}
			asg.Topics = append(asg.Topics, at)
			sa := kmsg.NewSyncGroupRequestGroupAssignment()
			sa.MemberID, sa.MemberAssignment = member, asg.AppendTo(nil)
			sync.GroupAssignment = append(sync.GroupAssignment, sa)
			sr := rawRoundTrip(t, c, sync).(*kmsg.SyncGroupResponse)
			if sr.ErrorCode != 0 || !bytes.Equal(sr.MemberAssignment, sa.MemberAssignment) {
				t.Fatalf("sync: %+v", sr)
			}

			hb := kmsg.NewPtrHeartbeatRequest()
			hb.SetVersion(clamp(v, 0, 4))
			hb.Group, hb.Generation, hb.MemberID = group, 1, member
			if code := rawRoundTrip(t, c, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
				t.Fatalf("heartbeat: code %d", code)
			}
			hb.Generation = 0
			if code := rawRoundTrip(t, c, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.IllegalGeneration.Code {
				t.Fatalf("heartbeat of a stale generation: code %d", code)
			}
			hb.Generation, hb.MemberID = 1, "nobody"
			if code := rawRoundTrip(t, c, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.UnknownMemberID.Code {
				t.Fatalf("heartbeat of an unknown member: code %d", code)
			}

			oc := kmsg.NewPtrOffsetCommitRequest()
			oc.SetVersion(clamp(v, 2, 9))
			oc.Group, oc.Generation, oc.MemberID = group, 1, member
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = "gsweep"
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata = 1, 42, -1, kmsg.StringPtr("m")
			ot.Partitions = append(ot.Partitions, op)
			oc.Topics = append(oc.Topics, ot)
			if code := rawRoundTrip(t, c, oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("offset commit: code %d", code)
			}

			of := kmsg.NewPtrOffsetFetchRequest()
			of.SetVersion(clamp(v, 1, 9))
			of.Group = group
			ft := kmsg.NewOffsetFetchRequestTopic()
			ft.Topic, ft.Partitions = "gsweep", []int32{0, 1}
			of.Topics = append(of.Topics, ft)
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = group
			rgt := kmsg.NewOffsetFetchRequestGroupTopic()
			rgt.Topic, rgt.Partitions = "gsweep", []int32{0, 1}
			rg.Topics = append(rg.Topics, rgt)
			of.Groups = append(of.Groups, rg)
			ofr := rawRoundTrip(t, c, of).(*kmsg.OffsetFetchResponse)
			got := map[int32]int64{}
			if of.Version >= 8 {
				for _, p := range ofr.Groups[0].Topics[0].Partitions {
					got[p.Partition] = p.Offset
				}
			} else {
				for _, p := range ofr.Topics[0].Partitions {
					got[p.Partition] = p.Offset
				}
			}
			if got[0] != -1 || got[1] != 42 {
				t.Fatalf("offset fetch: %v", got)
			}

			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.SetVersion(clamp(v, 0, 5))
			dg.Groups = []string{group}
			dgr := rawRoundTrip(t, c, dg).(*kmsg.DescribeGroupsResponse).Groups[0]
			if dgr.ErrorCode != 0 || dgr.State != "Stable" || len(dgr.Members) != 1 || dgr.Members[0].ClientID != "runnel-e2e-raw" ||
				!bytes.Equal(dgr.Members[0].MemberAssignment, sa.MemberAssignment) {
				t.Fatalf("describe: %+v", dgr)
			}

			lg := kmsg.NewPtrListGroupsRequest()
			lg.SetVersion(clamp(v, 0, 4))
			if !slices.ContainsFunc(rawRoundTrip(t, c, lg).(*kmsg.ListGroupsResponse).Groups,
				func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == group && g.ProtocolType == "consumer" }) {
				t.Fatal("list groups misses the group")
			}

			lv := kmsg.NewPtrLeaveGroupRequest()
			lv.SetVersion(clamp(v, 0, 5))
			lv.Group, lv.MemberID = group, member
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = member
			lv.Members = append(lv.Members, lm)
			lr := rawRoundTrip(t, c, lv).(*kmsg.LeaveGroupResponse)
			if lr.ErrorCode != 0 || (lv.Version >= 3 && lr.Members[0].ErrorCode != 0) {
				t.Fatalf("leave: %+v", lr)
			}

			od := kmsg.NewPtrOffsetDeleteRequest()
			od.Group = group
			odt := kmsg.NewOffsetDeleteRequestTopic()
			odt.Topic = "gsweep"
			odp := kmsg.NewOffsetDeleteRequestTopicPartition()
			odp.Partition = 1
			odt.Partitions = append(odt.Partitions, odp)
			od.Topics = append(od.Topics, odt)
			if r := rawRoundTrip(t, c, od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("offset delete: %+v", r)
			}

			dl := kmsg.NewPtrDeleteGroupsRequest()
			dl.SetVersion(clamp(v, 0, 2))
			dl.Groups = []string{group}
			if code := rawRoundTrip(t, c, dl).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
				t.Fatalf("delete group: code %d", code)
			}
			if code := rawRoundTrip(t, c, dl).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != kerr.GroupIDNotFound.Code {
				t.Fatalf("deleting it again: code %d", code)
			}
		})
	}
}

// TestGroupRebalanceTimeout: a member that does not rejoin within the
// rebalance timeout is dropped from the new generation, and learns it with
// UNKNOWN_MEMBER_ID.
func TestGroupRebalanceTimeout(t *testing.T) {
	n := kafkaNode(t)
	httpCreateTopic(t, n, "gtimeout", 2)
	join := func(c net.Conn, member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(3) // no MEMBER_ID_REQUIRED round
		req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "timeout-group", member, 30000, 2000, "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"gtimeout"}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		return rawRoundTrip(t, c, req).(*kmsg.JoinGroupResponse)
	}
	sync := func(c net.Conn, member string, gen int32, assign map[string][]byte) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.SetVersion(3)
		req.Group, req.MemberID, req.Generation = "timeout-group", member, gen
		for id, a := range assign {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, a
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
		return rawRoundTrip(t, c, req).(*kmsg.SyncGroupResponse)
	}
	heartbeat := func(c net.Conn, member string, gen int32) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(3)
		req.Group, req.MemberID, req.Generation = "timeout-group", member, gen
		return rawRoundTrip(t, c, req).(*kmsg.HeartbeatResponse).ErrorCode
	}
	ca, cb := rawDial(t, n.KafkaAddr), rawDial(t, n.KafkaAddr)
	ja := join(ca, "")
	if ja.ErrorCode != 0 || ja.Generation != 1 {
		t.Fatalf("first join %+v", ja)
	}
	if r := sync(ca, ja.MemberID, 1, map[string][]byte{ja.MemberID: {0, 0, 0, 0, 0, 0, 0, 0}}); r.ErrorCode != 0 {
		t.Fatalf("sync %+v", r)
	}
	// B joins: the group prepares a rebalance; A only heartbeats, all
	// along, so its session (30 s) never lapses: only the rebalance
	// timeout (2 s) can drop it and complete B's join. (It bounded the
	// join's time instead, between the two, a timing assertion.)
	done := make(chan *kmsg.JoinGroupResponse, 1)
	start := time.Now()
	go func() { done <- join(cb, "") }()
	var jb *kmsg.JoinGroupResponse
	told := false // A was told to rejoin
	hung := time.After(60 * time.Second)
	for jb == nil {
		select {
		case jb = <-done:
		case <-hung:
			t.Fatalf("B's join did not complete in 60 s while A heartbeat without rejoining (told to rejoin: %v)", told)
		case <-time.After(100 * time.Millisecond):
			if heartbeat(ca, ja.MemberID, 1) == kerr.RebalanceInProgress.Code {
				told = true
			}
		}
	}
	took := time.Since(start)
	if jb.ErrorCode != 0 || jb.Generation != 2 || jb.LeaderID != jb.MemberID || len(jb.Members) != 1 {
		t.Fatalf("B's join after A missed the rebalance: %+v", jb)
	}
	if !told {
		t.Error("A's heartbeats were never answered REBALANCE_IN_PROGRESS")
	}
	// Not before the rebalance timeout: the node waited for A.
	if took < 1500*time.Millisecond {
		t.Errorf("B's join completed after %v, before the rebalance timeout (2s)", took)
	}
	if code := heartbeat(ca, ja.MemberID, 1); code != kerr.UnknownMemberID.Code {
		t.Errorf("A's heartbeat after being dropped: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	// A sync for a generation that moved on is ILLEGAL_GENERATION.
	if r := sync(cb, jb.MemberID, 1, nil); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Errorf("sync of a stale generation: code %d", r.ErrorCode)
	}
}
