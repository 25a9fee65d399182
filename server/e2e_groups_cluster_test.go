package server_test

// End-to-end tests of groups across restarts and coordinator failover.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"
)

// TestGroupSurvivesRestart: kill -9 the node under a consuming group. The
// restarted coordinator loads offsets and the group's generation from
// __consumer_offsets; committed offsets do not go backwards and the member,
// still heartbeating its generation, carries on without a rebalance and
// without reading anything twice.
func TestGroupSurvivesRestart(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "grestart", 3)
	produceIndexed(t, c, "grestart", 0, 300)
	seen := newSeenSet()
	startFranzMember(t, n.KafkaAddr, "restart-group", "grestart", "a", seen, true,
		kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	servertest.WaitFor(t, 30*time.Second, "first records consumed and committed", func() bool {
		d, ok := tryDescribe(t, c, "restart-group")
		return ok && seen.missing(300) == 0 && len(d.Offsets) == 3 && d.Lag == 0
	})
	before := describeGroup(t, c, "restart-group")
	offsets := groupOffsets(t, c, "restart-group")

	n.Kill()
	n.Start()
	after := groupOffsets(t, c, "restart-group")
	for k, off := range offsets {
		if after[k] < off {
			t.Errorf("%s: committed offset went back from %d to %d", k, off, after[k])
		}
	}
	produceIndexed(t, c, "grestart", 300, 600)
	servertest.WaitFor(t, 30*time.Second, "records after the restart consumed", func() bool { return seen.missing(600) == 0 })
	d := describeGroup(t, c, "restart-group")
	if d.Generation != before.Generation || len(d.Members) != 1 || d.Members[0].MemberID != before.Members[0].MemberID {
		t.Errorf("generation %d member %+v after the restart; before %d %+v", d.Generation, d.Members, before.Generation, before.Members)
	}
	if dup := seen.duplicates(); dup != 0 {
		t.Errorf("%d records read twice", dup)
	}
}

// javaHash is Java's String.hashCode (ASCII group ids only), to find a
// group's offsets partition from outside.
func javaHash(s string) int32 {
	var h int32
	for _, c := range []byte(s) {
		h = 31*h + int32(c)
	}
	return h
}

// TestGroupCoordinatorFailover: kill -9 the broker leading the group's
// offsets partition. Committed offsets survive and never go backwards, the
// members rejoin with the new coordinator and read everything produced
// after the kill.
func TestGroupCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	cl := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: []string{"--broker-heartbeat-interval", "250ms", "--broker-session-timeout", "2s", "--replica-lag-time-max", "2s"}})
	var seeds []string
	for _, n := range cl.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	c := newAPIClient(t, cl.Nodes[0])
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "gfail", "partitions": 4, "replication_factor": 3}, http.StatusCreated, nil)
	servertest.WaitFor(t, 30*time.Second, "every node to see gfail in sync", func() bool {
		for _, n := range cl.Nodes {
			var d api.TopicDetail
			status, body := newAPIClient(t, n).do(http.MethodGet, "/v1/topics/gfail", "", nil)
			if status != http.StatusOK || json.Unmarshal(body, &d) != nil || len(d.Partitions) != 4 {
				return false
			}
			for _, p := range d.Partitions {
				if len(p.ISR) != 3 {
					return false
				}
			}
		}
		return true
	})
	produceIndexed(t, c, "gfail", 0, 400)
	seen := newSeenSet()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}
	startFranzMember(t, seeds[0], "fail-group", "gfail", "a", seen, true, opts...)
	startFranzMember(t, seeds[0], "fail-group", "gfail", "b", seen, true, opts...)
	waitSpread(t, c, "fail-group", 2, 4, 60*time.Second)
	servertest.WaitFor(t, 30*time.Second, "first records consumed and committed", func() bool {
		d, ok := tryDescribe(t, c, "fail-group")
		return ok && seen.missing(400) == 0 && len(d.Offsets) == 4 && d.Lag == 0
	})

	// Any node serves an HTTP member: each call of this one lands on a
	// different node and is proxied to the coordinator; every node lists
	// both groups.
	var join api.GroupMembership
	newAPIClient(t, cl.Nodes[0]).json(http.MethodPost, "/v1/groups/fail-http/members",
		map[string]any{"topics": []string{"gfail"}, "session_timeout_ms": 20000}, http.StatusOK, &join)
	member := "/v1/groups/fail-http/members/" + url.PathEscape(join.MemberID)
	got := 0
	for i := 0; got < 400; i++ {
		var res client.GroupPollResponse
		newAPIClient(t, cl.Nodes[i%3]).json(http.MethodGet, member+"/records?max_records=1000&wait_ms=500", nil, http.StatusOK, &res)
		got += len(res.Records)
		newAPIClient(t, cl.Nodes[(i+1)%3]).json(http.MethodPost, member+"/offsets", nil, http.StatusOK, nil)
		if i > 100 {
			t.Fatalf("HTTP member read %d of 400 records", got)
		}
	}
	for _, n := range cl.Nodes {
		var list api.GroupList
		newAPIClient(t, n).json(http.MethodGet, "/v1/groups", nil, http.StatusOK, &list)
		if len(list.Groups) != 2 || list.Groups[0].Group != "fail-group" || list.Groups[1].Group != "fail-http" {
			t.Errorf("node %s lists %+v", n.URL, list.Groups)
		}
		if d := describeGroup(t, newAPIClient(t, n), "fail-http"); d.Lag != 0 || len(d.Members) != 1 {
			t.Errorf("fail-http through %s: lag %d, %d members", n.URL, d.Lag, len(d.Members))
		}
	}
	newAPIClient(t, cl.Nodes[2]).json(http.MethodDelete, member, nil, http.StatusNoContent, nil)

	// The failover needs the group's __consumer_offsets partition on all
	// three brokers and in sync (every broker was alive when it was created:
	// gfail's ISR above shows it), so wait for that rather than skip.
	var offsetsTopic api.TopicDetail
	h := javaHash("fail-group")
	if h < 0 {
		h = -h
	}
	var part api.PartitionDetail
	servertest.WaitFor(t, 30*time.Second, "the group's offsets partition in sync on 3 brokers", func() bool {
		c.json(http.MethodGet, "/v1/topics/__consumer_offsets", nil, http.StatusOK, &offsetsTopic)
		part = offsetsTopic.Partitions[h%int32(len(offsetsTopic.Partitions))]
		return len(part.Replicas) == 3 && len(part.ISR) == 3 && part.Leader > 0
	})
	d := describeGroup(t, c, "fail-group")
	coord := cl.Node(int(part.Leader))
	var survivor *servertest.Node
	for _, n := range cl.Nodes {
		if n != coord {
			survivor = n
			break
		}
	}
	// Every broker names the same coordinator; the others refuse the
	// group's requests with NOT_COORDINATOR.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey = "fail-group"
	if r := rawRoundTrip(t, rawDial(t, survivor.KafkaAddr), fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != part.Leader {
		t.Errorf("find coordinator through a survivor: %+v, want node %d", r, part.Leader)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(3)
	hb.Group, hb.Generation, hb.MemberID = "fail-group", d.Generation, d.Members[0].MemberID
	if code := rawRoundTrip(t, rawDial(t, survivor.KafkaAddr), hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("heartbeat to a broker that does not coordinate the group: code %d, want NOT_COORDINATOR", code)
	}
	sc := newAPIClient(t, survivor)
	before := groupOffsets(t, sc, "fail-group")
	t.Logf("killing broker %d, coordinator of fail-group (generation %d)", part.Leader, d.Generation)
	coord.Kill()
	killed := time.Now()

	servertest.WaitFor(t, 60*time.Second, "a new coordinator", func() bool {
		d, ok := tryDescribe(t, sc, "fail-group")
		return ok && d.State != ""
	})
	t.Logf("new coordinator after %v", time.Since(killed).Round(10*time.Millisecond))
	after := groupOffsets(t, sc, "fail-group")
	for k, off := range before {
		if after[k] < off {
			t.Errorf("%s: committed offset went back from %d to %d", k, off, after[k])
		}
	}
	servertest.WaitFor(t, 60*time.Second, "producing after the failover", func() bool {
		status, _ := sc.do(http.MethodPost, "/v1/topics/gfail/records?encoding=string", "application/json",
			[]byte(`{"records":[{"value":"400","partition":0}]}`))
		return status == http.StatusOK
	})
	t.Logf("producing again after %v", time.Since(killed).Round(10*time.Millisecond))
	produceIndexed(t, sc, "gfail", 401, 800)
	servertest.WaitFor(t, 60*time.Second, "records after the failover consumed", func() bool { return seen.missing(800) == 0 })
	waitSpread(t, sc, "fail-group", 2, 4, 30*time.Second)
	t.Logf("members consuming again %v after the kill; duplicates %d", time.Since(killed).Round(10*time.Millisecond), seen.duplicates())
}
