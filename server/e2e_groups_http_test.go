package server_test

// End-to-end tests of the groups HTTP API: lag, offsets, reset, delete, and
// HTTP members sharing a group with Kafka members.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"
)

// TestGroupLagHTTP: the lag GET /v1/groups/{group} reports is log end
// minus committed offset, per partition, and its sum.
func TestGroupLagHTTP(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "glag", 3)
	produceIndexed(t, c, "glag", 0, 300)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var topic api.TopicDetail
	c.json(http.MethodGet, "/v1/topics/glag", nil, http.StatusOK, &topic)
	commits := map[int32]int64{0: 0, 1: 7, 2: topic.Partitions[2].HighWatermark}
	body := map[string]any{"offsets": []map[string]any{
		{"topic": "glag", "partition": 0, "offset": commits[0]},
		{"topic": "glag", "partition": 1, "offset": commits[1]},
		{"topic": "glag", "partition": 2, "offset": commits[2]},
	}}
	c.json(http.MethodPost, "/v1/groups/lag-group/offsets", body, http.StatusOK, nil)
	d := describeGroup(t, c, "lag-group")
	if d.State != "Empty" || len(d.Offsets) != 3 {
		t.Fatalf("group %+v", d)
	}
	var total int64
	for _, o := range d.Offsets {
		end := topic.Partitions[o.Partition].HighWatermark
		if o.CommittedOffset != commits[o.Partition] || o.EndOffset != end || o.Lag != end-commits[o.Partition] {
			t.Errorf("partition %d: %+v, want committed %d end %d", o.Partition, o, commits[o.Partition], end)
		}
		if o.LagMS == nil || (o.Lag == 0) != (*o.LagMS == 0) {
			t.Errorf("partition %d: lag_ms %v with lag %d", o.Partition, o.LagMS, o.Lag)
		}
		total += o.Lag
	}
	if d.Lag != total || total == 0 {
		t.Errorf("total lag %d, partitions sum to %d", d.Lag, total)
	}
	// A Kafka client sees the same committed offsets.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "lag-group"
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("offset fetch: %+v, %v", resp, err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.Offset != commits[p.Partition] {
			t.Errorf("kafka sees partition %d at %d, want %d", p.Partition, p.Offset, commits[p.Partition])
		}
	}

	// The coordinator's sampler exports the same lag per group and topic.
	servertest.WaitFor(t, 30*time.Second, "runnel_group_lag in /metrics", func() bool {
		resp, err := http.Get(n.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return bytes.Contains(body, []byte(fmt.Sprintf("runnel_group_lag{group=\"lag-group\",topic=\"glag\"} %d\n", total)))
	})
	var series api.Series
	c.json(http.MethodGet, "/v1/stats/series", nil, http.StatusOK, &series)
	if len(series.Groups) != 1 || series.Groups[0].Group != "lag-group" || slices.Max(series.Groups[0].Lag) != total {
		t.Errorf("series groups %+v, want lag-group with lag %d", series.Groups, total)
	}

	// Offsets of a group with members cannot be reset or overwritten
	// without its member id; a dry run changes nothing.
	var reset api.GroupResetResult
	c.json(http.MethodPost, "/v1/groups/lag-group/offsets/reset", map[string]any{"strategy": "latest"}, http.StatusOK, &reset)
	if !reset.DryRun || len(reset.Offsets) != 3 || reset.Offsets[1].NewOffset != topic.Partitions[1].HighWatermark {
		t.Fatalf("dry run %+v", reset)
	}
	if d := describeGroup(t, c, "lag-group"); d.Lag != total {
		t.Fatalf("a dry run changed the lag to %d", d.Lag)
	}
	member := startFranzMember(t, n.KafkaAddr, "lag-group", "glag", "m", newSeenSet(), false)
	waitSpread(t, c, "lag-group", 1, 3, 30*time.Second)
	c.problem(http.MethodPost, "/v1/groups/lag-group/offsets/reset", "application/json",
		[]byte(`{"strategy":"earliest","dry_run":false}`), http.StatusConflict, "conflict")
	c.problem(http.MethodPost, "/v1/groups/lag-group/offsets", "application/json",
		[]byte(`{"offsets":[{"topic":"glag","partition":0,"offset":1}]}`), http.StatusConflict, "conflict")
	c.problem(http.MethodDelete, "/v1/groups/lag-group", "", nil, http.StatusConflict, "conflict")
	member.stop()
	c.json(http.MethodPost, "/v1/groups/lag-group/offsets/reset", map[string]any{"strategy": "latest", "dry_run": false}, http.StatusOK, &reset)
	if d := describeGroup(t, c, "lag-group"); d.Lag != 0 || d.State != "Empty" {
		t.Fatalf("after reset to latest: lag %d state %s", d.Lag, d.State)
	}
	for _, tc := range []struct {
		body string
		want func(p int32) int64
	}{
		{`{"strategy":"timestamp","timestamp":0}`, func(int32) int64 { return 0 }},
		{`{"strategy":"timestamp","timestamp":9999999999999}`, func(p int32) int64 { return topic.Partitions[p].HighWatermark }},
		{`{"strategy":"offset","offset":5}`, func(int32) int64 { return 5 }},
		{`{"strategy":"offset","offset":1000000}`, func(p int32) int64 { return topic.Partitions[p].HighWatermark }},
		{`{"strategy":"earliest","topics":["glag"]}`, func(int32) int64 { return 0 }},
	} {
		var plan api.GroupResetResult
		c.json(http.MethodPost, "/v1/groups/lag-group/offsets/reset", json.RawMessage(tc.body), http.StatusOK, &plan)
		if len(plan.Offsets) != 3 {
			t.Fatalf("%s: %+v", tc.body, plan)
		}
		for _, o := range plan.Offsets {
			if o.NewOffset != tc.want(o.Partition) || o.CurrentOffset != topic.Partitions[o.Partition].HighWatermark {
				t.Errorf("%s: partition %d planned %+v", tc.body, o.Partition, o)
			}
		}
	}
	c.json(http.MethodDelete, "/v1/groups/lag-group", nil, http.StatusNoContent, nil)
	c.problem(http.MethodGet, "/v1/groups/lag-group", "", nil, http.StatusNotFound, "unknown-group")

}

func TestGroupMixedHTTPAndKafka(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gmixed", 6)
	seen := newSeenSet()
	startFranzMember(t, n.KafkaAddr, "mixed-group", "gmixed", "franz-a", seen, true)
	startFranzMember(t, n.KafkaAddr, "mixed-group", "gmixed", "franz-b", seen, true)
	hm := startHTTPMember(t, n, "mixed-group", "gmixed", seen)
	d := waitSpread(t, c, "mixed-group", 3, 6, 60*time.Second)
	kinds := map[string]int{}
	for _, m := range d.Members {
		kinds[m.Kind]++
	}
	if kinds["kafka"] != 2 || kinds["http"] != 1 {
		t.Fatalf("members %+v", d.Members)
	}
	const records = 3000
	produceIndexed(t, c, "gmixed", 0, records)
	servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(records) == 0 })
	t.Logf("protocol %s, per-member records %v, HTTP polls %d", d.Protocol, seen.counts, hm.polls.Load())
	if dup := seen.duplicates(); dup != 0 {
		t.Errorf("%d records read twice", dup)
	}
	if seen.counts["http"] == 0 {
		t.Error("the HTTP member read nothing")
	}
	hm.stop()
	c.json(http.MethodDelete, hm.path, nil, http.StatusNoContent, nil)
	waitSpread(t, c, "mixed-group", 2, 6, 30*time.Second)
}

// groupOffsets reads GET /v1/groups/{group}/offsets as partition -> offset.
func groupOffsets(t *testing.T, c *apiClient, group string) map[string]int64 {
	t.Helper()
	var res api.GroupOffsets
	c.json(http.MethodGet, "/v1/groups/"+url.PathEscape(group)+"/offsets", nil, http.StatusOK, &res)
	out := map[string]int64{}
	for _, o := range res.Offsets {
		out[fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o.Offset
	}
	return out
}

// httpMember is an HTTP group member polling in its own goroutine: poll,
// record, commit its positions.
type httpMember struct {
	id, path string
	polls    atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
}

func startHTTPMember(t *testing.T, n *servertest.Node, group, topic string, seen *seenSet) *httpMember {
	t.Helper()
	c := newAPIClient(t, n)
	var join api.GroupMembership
	c.json(http.MethodPost, "/v1/groups/"+url.PathEscape(group)+"/members", map[string]any{"topics": []string{topic}, "client_id": "curl",
		"session_timeout_ms": 10000}, http.StatusOK, &join)
	if join.MemberID == "" {
		t.Fatal("no member id")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &httpMember{id: join.MemberID, path: "/v1/groups/" + url.PathEscape(group) + "/members/" + url.PathEscape(join.MemberID),
		cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			var res client.GroupPollResponse
			c.json(http.MethodGet, m.path+"/records?wait_ms=200&encoding=string", nil, http.StatusOK, &res)
			m.polls.Add(1)
			for _, r := range res.Records {
				v, _ := r.Value.(string) // encoding=string
				seen.add("http", []byte(v))
			}
			if len(res.Records) > 0 {
				c.json(http.MethodPost, m.path+"/offsets", nil, http.StatusOK, nil)
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *httpMember) stop() {
	m.cancel()
	<-m.done
}

// TestGroupHTTPMemberFirst: an HTTP member alone is assigned everything by
// the coordinator (range); when franz-go members (cooperative-sticky only)
// join, the group switches to their protocol, the HTTP member gives
// partitions up through cooperative rebalances the coordinator rejoins it
// for, and no record is read twice.
func TestGroupHTTPMemberFirst(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "ghttpfirst", 6)
	seen := newSeenSet()
	startHTTPMember(t, n, "http-first", "ghttpfirst", seen)
	d := waitSpread(t, c, "http-first", 1, 6, 10*time.Second)
	if d.Protocol != "range" {
		t.Errorf("an HTTP-only group uses %q, want range", d.Protocol)
	}
	produceIndexed(t, c, "ghttpfirst", 0, 300)
	servertest.WaitFor(t, 20*time.Second, "the HTTP member reads and commits everything", func() bool {
		d, ok := tryDescribe(t, c, "http-first")
		return ok && seen.missing(300) == 0 && len(d.Offsets) == 6 && d.Lag == 0
	})
	startFranzMember(t, n.KafkaAddr, "http-first", "ghttpfirst", "franz-a", seen, true)
	startFranzMember(t, n.KafkaAddr, "http-first", "ghttpfirst", "franz-b", seen, true)
	d = waitSpread(t, c, "http-first", 3, 6, 60*time.Second)
	if d.Protocol != "cooperative-sticky" {
		t.Errorf("protocol %q after franz-go joined, want cooperative-sticky", d.Protocol)
	}
	produceIndexed(t, c, "ghttpfirst", 300, 900)
	servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(900) == 0 })
	if dup := seen.duplicates(); dup != 0 {
		t.Errorf("%d records read twice", dup)
	}
	t.Logf("generation %d, per-member records %v", d.Generation, seen.counts)
}
