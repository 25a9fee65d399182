package server_test

// End-to-end tests of consumer groups: real clients (franz-go, sarama,
// kafkajs, kcat, plain HTTP) in groups coordinated by a real runnel process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// groupDetail is the part of GET /v1/groups/{group} the tests read.
type groupDetail struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Protocol   string `json:"protocol"`
	Generation int32  `json:"generation"`
	Members    []struct {
		MemberID   string `json:"member_id"`
		ClientID   string `json:"client_id"`
		ClientHost string `json:"client_host"`
		Kind       string `json:"kind"`
		Assignment []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
	Offsets []struct {
		Topic           string `json:"topic"`
		Partition       int32  `json:"partition"`
		CommittedOffset int64  `json:"committed_offset"`
		EndOffset       int64  `json:"end_offset"`
		Lag             int64  `json:"lag"`
		LagMS           *int64 `json:"lag_ms"`
	} `json:"offsets"`
	Lag int64 `json:"lag"`
}

func describeGroup(t testing.TB, c *apiClient, group string) groupDetail {
	t.Helper()
	var d groupDetail
	c.json(http.MethodGet, "/v1/groups/"+url.PathEscape(group), nil, http.StatusOK, &d)
	return d
}

// tryDescribe describes a group that may not exist yet.
func tryDescribe(t testing.TB, c *apiClient, group string) (groupDetail, bool) {
	t.Helper()
	var d groupDetail
	status, body := c.do(http.MethodGet, "/v1/groups/"+url.PathEscape(group), "", nil)
	if status != http.StatusOK {
		return d, false
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	return d, true
}

// assignedCounts returns the partition count of each member of a stable
// group (nil while it rebalances) and the total.
func assignedCounts(d groupDetail) ([]int, int) {
	if d.State != "Stable" {
		return nil, 0
	}
	var counts []int
	total := 0
	for _, m := range d.Members {
		n := 0
		for _, a := range m.Assignment {
			n += len(a.Partitions)
		}
		counts = append(counts, n)
		total += n
	}
	return counts, total
}

// waitSpread waits until the group is stable with members members sharing
// partitions partitions, each holding at least one.
func waitSpread(t *testing.T, c *apiClient, group string, members, partitions int, timeout time.Duration) groupDetail {
	t.Helper()
	var d groupDetail
	servertest.WaitFor(t, timeout, fmt.Sprintf("group %s stable with %d members over %d partitions", group, members, partitions), func() bool {
		var ok bool
		if d, ok = tryDescribe(t, c, group); !ok {
			return false
		}
		counts, total := assignedCounts(d)
		return len(counts) == members && total == partitions && !slices.Contains(counts, 0)
	})
	return d
}

// produceIndexed produces records [from, to) with value "i" over HTTP, keyed
// so that they spread over the partitions.
func produceIndexed(t *testing.T, c *apiClient, topic string, from, to int) {
	t.Helper()
	for start := from; start < to; start += 500 {
		var recs []map[string]any
		for i := start; i < min(start+500, to); i++ {
			recs = append(recs, map[string]any{"key": "k" + strconv.Itoa(i), "value": strconv.Itoa(i)})
		}
		c.json(http.MethodPost, "/v1/topics/"+topic+"/records?encoding=string", map[string]any{"records": recs}, http.StatusOK, nil)
	}
}

// seenSet records which member read which record index.
type seenSet struct {
	mu     sync.Mutex
	by     map[int][]string
	counts map[string]int
}

func newSeenSet() *seenSet { return &seenSet{by: map[int][]string{}, counts: map[string]int{}} }

func (s *seenSet) add(member string, value []byte) {
	i, err := strconv.Atoi(string(value))
	if err != nil {
		panic(fmt.Sprintf("record value %q", value))
	}
	s.mu.Lock()
	s.by[i] = append(s.by[i], member)
	s.counts[member]++
	s.mu.Unlock()
}

// missing returns how many of [0, n) no member in from (nil: any) has read.
func (s *seenSet) missing(n int, from ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	miss := 0
	for i := range n {
		if !slices.ContainsFunc(s.by[i], func(m string) bool { return len(from) == 0 || slices.Contains(from, m) }) {
			miss++
		}
	}
	return miss
}

func (s *seenSet) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := 0
	for _, ms := range s.by {
		d += len(ms) - 1
	}
	return d
}

// franzMember is one franz-go group member polling in its own goroutine.
type franzMember struct {
	name   string
	cl     *kgo.Client
	dialer *killableDialer
	cancel context.CancelFunc
	done   chan struct{}
}

// killableDialer lets a test cut a client off the network without it
// leaving its group (as a crashed process would).
type killableDialer struct {
	mu     sync.Mutex
	dead   bool
	conns  []net.Conn
	dialer net.Dialer
}

func (d *killableDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killed")
	}
	c, err := d.dialer.DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// startFranzMember starts a member; commit says whether it commits what it
// reads (synchronously, after recording it).
func startFranzMember(t *testing.T, addr, group, topic, name string, seen *seenSet, commit bool, opts ...kgo.Opt) *franzMember {
	t.Helper()
	m := &franzMember{name: name, dialer: &killableDialer{}, done: make(chan struct{})}
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.Dialer(m.dialer.DialContext), kgo.DisableAutoCommit()}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) {
				seen.add(name, r.Value)
				recs = append(recs, r)
			})
			if commit && len(recs) > 0 {
				if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop stops polling and closes the client (leaving the group).
func (m *franzMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

func TestGroupFranzGo(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gfranz", 6)
	const records = 3000
	produceIndexed(t, c, "gfranz", 0, records)
	seen := newSeenSet()
	for i := range 3 {
		startFranzMember(t, n.KafkaAddr, "franz-group", "gfranz", fmt.Sprintf("franz-%d", i), seen, true)
	}
	d := waitSpread(t, c, "franz-group", 3, 6, 30*time.Second)
	servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(records) == 0 })
	t.Logf("protocol %s, generation %d, per-member records %v, duplicates %d", d.Protocol, d.Generation, seen.counts, seen.duplicates())
	for _, m := range d.Members {
		if m.Kind != "kafka" || m.ClientHost == "" || m.ClientID == "" {
			t.Errorf("member %+v", m)
		}
	}
	servertest.WaitFor(t, 20*time.Second, "lag 0", func() bool {
		d := describeGroup(t, c, "franz-group")
		return len(d.Offsets) == 6 && d.Lag == 0
	})
}

// TestGroupMemberKilled: a member cut off the network without leaving is
// expired after its session timeout; the others take its partitions and,
// committing manually, read every record it had not committed.
func TestGroupMemberKilled(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gkill", 6)
	const half = 600
	produceIndexed(t, c, "gkill", 0, half)
	seen := newSeenSet()
	const session = 3 * time.Second
	opts := []kgo.Opt{kgo.SessionTimeout(session), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.Balancers(kgo.RangeBalancer())}
	startFranzMember(t, n.KafkaAddr, "kill-group", "gkill", "a", seen, true, opts...)
	startFranzMember(t, n.KafkaAddr, "kill-group", "gkill", "b", seen, true, opts...)
	victim := startFranzMember(t, n.KafkaAddr, "kill-group", "gkill", "victim", seen, false, opts...) // never commits
	waitSpread(t, c, "kill-group", 3, 6, 30*time.Second)
	servertest.WaitFor(t, 30*time.Second, "first half consumed", func() bool { return seen.missing(half) == 0 })
	if seen.counts["victim"] == 0 {
		t.Fatal("the victim read nothing before being killed")
	}

	victim.dialer.kill()
	killed := time.Now()
	produceIndexed(t, c, "gkill", half, 2*half)
	waitSpread(t, c, "kill-group", 2, 6, session+15*time.Second)
	took := time.Since(killed)
	t.Logf("survivors own every partition %v after the kill (session timeout %v)", took.Round(10*time.Millisecond), session)
	if took > session+5*time.Second {
		t.Errorf("partitions moved after %v, session timeout %v", took, session)
	}
	servertest.WaitFor(t, 30*time.Second, "survivors read every record", func() bool { return seen.missing(2*half, "a", "b") == 0 })
}

func TestGroupSarama(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gsarama", 6)
	const records = 3000
	produceIndexed(t, c, "gsarama", 0, records)
	seen := newSeenSet()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 3 {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.ClientID = fmt.Sprintf("sarama-%d", i)
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
		cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
		cg, err := sarama.NewConsumerGroup([]string{n.KafkaAddr}, "sarama-group", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		h := &saramaHandler{name: cfg.ClientID, seen: seen}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{"gsarama"}, h); err != nil && ctx.Err() == nil {
					t.Logf("%s: consume: %v", h.name, err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	d := waitSpread(t, c, "sarama-group", 3, 6, 60*time.Second)
	servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(records) == 0 })
	t.Logf("protocol %s, per-member records %v, duplicates %d", d.Protocol, seen.counts, seen.duplicates())
	servertest.WaitFor(t, 20*time.Second, "committed to the end", func() bool { return describeGroup(t, c, "sarama-group").Lag == 0 })
	cancel()
}

type saramaHandler struct {
	name string
	seen *seenSet
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.seen.add(h.name, msg.Value)
		s.MarkMessage(msg, "")
	}
	return nil
}

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
	var topic struct {
		Partitions []struct {
			Partition     int32 `json:"partition"`
			HighWatermark int64 `json:"high_watermark"`
		} `json:"partitions"`
	}
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
	servertest.WaitFor(t, 15*time.Second, "runnel_group_lag in /metrics", func() bool {
		resp, err := http.Get(n.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return bytes.Contains(body, []byte(fmt.Sprintf("runnel_group_lag{group=\"lag-group\",topic=\"glag\"} %d\n", total)))
	})
	var series struct {
		Groups []struct {
			Group string  `json:"group"`
			Lag   []int64 `json:"lag"`
		} `json:"groups"`
	}
	c.json(http.MethodGet, "/v1/stats/series", nil, http.StatusOK, &series)
	if len(series.Groups) != 1 || series.Groups[0].Group != "lag-group" || slices.Max(series.Groups[0].Lag) != total {
		t.Errorf("series groups %+v, want lag-group with lag %d", series.Groups, total)
	}

	// Offsets of a group with members cannot be reset or overwritten
	// without its member id; a dry run changes nothing.
	var reset struct {
		DryRun  bool `json:"dry_run"`
		Offsets []struct {
			Partition int32 `json:"partition"`
			NewOffset int64 `json:"new_offset"`
		} `json:"offsets"`
	}
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
		var plan struct {
			Offsets []struct {
				Partition     int32 `json:"partition"`
				CurrentOffset int64 `json:"current_offset"`
				NewOffset     int64 `json:"new_offset"`
			} `json:"offsets"`
		}
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
	var join struct {
		MemberID   string `json:"member_id"`
		Generation int32  `json:"generation"`
	}
	c.json(http.MethodPost, "/v1/groups/mixed-group/members", map[string]any{"topics": []string{"gmixed"}, "client_id": "curl",
		"session_timeout_ms": 10000}, http.StatusOK, &join)
	if join.MemberID == "" {
		t.Fatal("no member id")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var polls atomic.Int64
	wg.Add(1)
	go func() { // the HTTP member: poll, record, commit
		defer wg.Done()
		hc := newAPIClient(t, n)
		for ctx.Err() == nil {
			var res struct {
				Records []struct {
					Topic string `json:"topic"`
					Value string `json:"value"`
				} `json:"records"`
			}
			hc.json(http.MethodGet, "/v1/groups/mixed-group/members/"+url.PathEscape(join.MemberID)+"/records?wait_ms=200&encoding=string",
				nil, http.StatusOK, &res)
			polls.Add(1)
			for _, r := range res.Records {
				seen.add("http", []byte(r.Value))
			}
			if len(res.Records) > 0 {
				hc.json(http.MethodPost, "/v1/groups/mixed-group/members/"+url.PathEscape(join.MemberID)+"/offsets", nil, http.StatusOK, nil)
			}
		}
	}()
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
	t.Logf("protocol %s, per-member records %v, HTTP polls %d", d.Protocol, seen.counts, polls.Load())
	if dup := seen.duplicates(); dup != 0 {
		t.Errorf("%d records read twice", dup)
	}
	if seen.counts["http"] == 0 {
		t.Error("the HTTP member read nothing")
	}
	cancel()
	wg.Wait()
	c.json(http.MethodDelete, "/v1/groups/mixed-group/members/"+url.PathEscape(join.MemberID), nil, http.StatusNoContent, nil)
	waitSpread(t, c, "mixed-group", 2, 6, 30*time.Second)
}

// TestGroupKafkajs runs testdata/kafkajs/groups.js: three kafkajs consumers
// in one group share six partitions and read every record.
func TestGroupKafkajs(t *testing.T) {
	dir := filepath.Join("testdata", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kafkajs not installed (npm ci in %s): %v", dir, err)
		}
		t.Skipf("kafkajs not installed; run npm ci in %s", dir)
	}
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gkafkajs", 6)
	const records = 1200
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "groups.js", n.KafkaAddr, "gkafkajs", "kafkajs-group", strconv.Itoa(records), "3")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitSpread(t, c, "kafkajs-group", 3, 6, 60*time.Second)
	produceIndexed(t, c, "gkafkajs", 0, records)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kafkajs: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.Bytes()
	var res struct {
		Distinct  int   `json:"distinct"`
		PerMember []int `json:"perMember"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil || res.Distinct != records || len(res.PerMember) != 3 {
		t.Fatalf("kafkajs output %q: %v", out, err)
	}
	t.Logf("kafkajs members read %v", res.PerMember)
	for i, k := range res.PerMember {
		if k == 0 {
			t.Errorf("member %d read nothing: partitions not spread (%v)", i, res.PerMember)
		}
	}
	servertest.WaitFor(t, 10*time.Second, "kafkajs commits to the end", func() bool {
		d, ok := tryDescribe(t, c, "kafkajs-group")
		return ok && len(d.Offsets) == 6 && d.Lag == 0
	})
}

// TestGroupKcat: two kcat -G (librdkafka's balanced consumer) processes in
// one group read every record between them.
func TestGroupKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat not installed")
		}
		t.Skip("kcat not installed")
	}
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gkcat", 4)
	const records = 800
	produceIndexed(t, c, "gkcat", 0, records)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	results := make(chan result, 2)
	var cmds []*exec.Cmd
	for i := range 2 {
		cmd := exec.CommandContext(ctx, "kcat", "-b", n.KafkaAddr, "-G", "kcat-group", "-o", "beginning", "-q",
			"-X", "client.id=kcat-"+strconv.Itoa(i), "-X", "auto.commit.interval.ms=200", "-f", "%s\n", "gkcat")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		go func() {
			err := cmd.Wait()
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%v: %s", err, stderr.String())
			} else {
				err = nil
			}
			results <- result{stdout.Bytes(), err}
		}()
	}
	d := waitSpread(t, c, "kcat-group", 2, 4, 60*time.Second)
	servertest.WaitFor(t, 30*time.Second, "kcat commits to the end", func() bool {
		d, ok := tryDescribe(t, c, "kcat-group")
		return ok && len(d.Offsets) == 4 && d.Lag == 0
	})
	for _, cmd := range cmds {
		cmd.Process.Signal(os.Interrupt)
	}
	seen := newSeenSet()
	for i := range 2 {
		r := <-results
		if r.err != nil {
			t.Fatalf("kcat: %v", r.err)
		}
		for _, line := range bytes.Fields(r.out) {
			seen.add("kcat-"+strconv.Itoa(i), line)
		}
	}
	if miss := seen.missing(records); miss != 0 {
		t.Fatalf("%d records read by neither kcat (read %v)", miss, seen.counts)
	}
	t.Logf("protocol %s, kcat members read %v", d.Protocol, seen.counts)
}

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

// groupOffsets reads GET /v1/groups/{group}/offsets as partition -> offset.
func groupOffsets(t *testing.T, c *apiClient, group string) map[string]int64 {
	t.Helper()
	var res struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		} `json:"offsets"`
	}
	c.json(http.MethodGet, "/v1/groups/"+url.PathEscape(group)+"/offsets", nil, http.StatusOK, &res)
	out := map[string]int64{}
	for _, o := range res.Offsets {
		out[fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o.Offset
	}
	return out
}

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

// TestGroupStaticMember: a static member (group.instance.id) that restarts
// takes its instance's place: the group keeps two members, not three, and
// the old member id is fenced.
func TestGroupStaticMember(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	httpCreateTopic(t, n, "gstatic", 4)
	seen := newSeenSet()
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.InstanceID(id), kgo.SessionTimeout(30 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}
	}
	startFranzMember(t, n.KafkaAddr, "static-group", "gstatic", "s1", seen, true, opts("instance-1")...)
	s2 := startFranzMember(t, n.KafkaAddr, "static-group", "gstatic", "s2", seen, true, opts("instance-2")...)
	d := waitSpread(t, c, "static-group", 2, 4, 30*time.Second)
	var old string
	for _, m := range d.Members {
		if m.ClientID == "s2" {
			old = m.MemberID
		}
	}
	s2.stop() // a static member does not leave on close
	if d := describeGroup(t, c, "static-group"); len(d.Members) != 2 {
		t.Fatalf("after closing a static member: %d members", len(d.Members))
	}
	startFranzMember(t, n.KafkaAddr, "static-group", "gstatic", "s2", seen, true, opts("instance-2")...)
	produceIndexed(t, c, "gstatic", 0, 400)
	servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(400) == 0 })
	d = waitSpread(t, c, "static-group", 2, 4, 30*time.Second)
	for _, m := range d.Members {
		if m.MemberID == old {
			t.Errorf("the replaced member id %s is still in the group", old)
		}
	}
	// The old member id is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4) // instance ids from v3
	hb.Group, hb.Generation, hb.MemberID, hb.InstanceID = "static-group", d.Generation, old, kmsg.StringPtr("instance-2")
	if code := rawRoundTrip(t, rawDial(t, n.KafkaAddr), hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Errorf("heartbeat of the replaced member: code %d, want FENCED_INSTANCE_ID", code)
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
			var d struct {
				Partitions []struct {
					ISR []int32 `json:"isr"`
				} `json:"partitions"`
			}
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
	var join struct {
		MemberID string `json:"member_id"`
	}
	newAPIClient(t, cl.Nodes[0]).json(http.MethodPost, "/v1/groups/fail-http/members",
		map[string]any{"topics": []string{"gfail"}, "session_timeout_ms": 20000}, http.StatusOK, &join)
	member := "/v1/groups/fail-http/members/" + url.PathEscape(join.MemberID)
	got := 0
	for i := 0; got < 400; i++ {
		var res struct {
			Records []json.RawMessage `json:"records"`
		}
		newAPIClient(t, cl.Nodes[i%3]).json(http.MethodGet, member+"/records?max_records=1000&wait_ms=500", nil, http.StatusOK, &res)
		got += len(res.Records)
		newAPIClient(t, cl.Nodes[(i+1)%3]).json(http.MethodPost, member+"/offsets", nil, http.StatusOK, nil)
		if i > 100 {
			t.Fatalf("HTTP member read %d of 400 records", got)
		}
	}
	for _, n := range cl.Nodes {
		var list struct {
			Groups []struct {
				Group string `json:"group"`
			} `json:"groups"`
		}
		newAPIClient(t, n).json(http.MethodGet, "/v1/groups", nil, http.StatusOK, &list)
		if len(list.Groups) != 2 || list.Groups[0].Group != "fail-group" || list.Groups[1].Group != "fail-http" {
			t.Errorf("node %s lists %+v", n.URL, list.Groups)
		}
		if d := describeGroup(t, newAPIClient(t, n), "fail-http"); d.Lag != 0 || len(d.Members) != 1 {
			t.Errorf("fail-http through %s: lag %d, %d members", n.URL, d.Lag, len(d.Members))
		}
	}
	newAPIClient(t, cl.Nodes[2]).json(http.MethodDelete, member, nil, http.StatusNoContent, nil)

	// The test needs __consumer_offsets replicated; say so plainly when the
	// cluster cannot do that yet rather than pretend.
	var offsetsTopic struct {
		Partitions []struct {
			Leader   int32   `json:"leader"`
			Replicas []int32 `json:"replicas"`
			ISR      []int32 `json:"isr"`
		} `json:"partitions"`
	}
	c.json(http.MethodGet, "/v1/topics/__consumer_offsets", nil, http.StatusOK, &offsetsTopic)
	h := javaHash("fail-group")
	if h < 0 {
		h = -h
	}
	part := offsetsTopic.Partitions[h%int32(len(offsetsTopic.Partitions))]
	if len(part.Replicas) < 3 || len(part.ISR) < 3 {
		t.Skipf("__consumer_offsets partition of the group has replicas %v, ISR %v: the cluster does not replicate it yet", part.Replicas, part.ISR)
	}
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
	// B joins: the group prepares a rebalance; A only heartbeats.
	done := make(chan *kmsg.JoinGroupResponse, 1)
	start := time.Now()
	go func() { done <- join(cb, "") }()
	servertest.WaitFor(t, 5*time.Second, "A told to rejoin", func() bool { return heartbeat(ca, ja.MemberID, 1) == kerr.RebalanceInProgress.Code })
	jb := <-done
	took := time.Since(start)
	if jb.ErrorCode != 0 || jb.Generation != 2 || jb.LeaderID != jb.MemberID || len(jb.Members) != 1 {
		t.Fatalf("B's join after A missed the rebalance: %+v", jb)
	}
	if took < 1500*time.Millisecond || took > 5*time.Second {
		t.Errorf("B's join completed after %v, rebalance timeout 2s", took)
	}
	if code := heartbeat(ca, ja.MemberID, 1); code != kerr.UnknownMemberID.Code {
		t.Errorf("A's heartbeat after being dropped: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	// A sync for a generation that moved on is ILLEGAL_GENERATION.
	if r := sync(cb, jb.MemberID, 1, nil); r.ErrorCode != kerr.IllegalGeneration.Code {
		t.Errorf("sync of a stale generation: code %d", r.ErrorCode)
	}
}
