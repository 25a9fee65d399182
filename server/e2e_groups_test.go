package server_test

// End-to-end tests of consumer groups: real clients (franz-go, sarama,
// kafkajs, kcat) in groups coordinated by a real runnel process. HTTP
// members and lag: e2e_groups_http_test.go; restarts and failover:
// e2e_groups_cluster_test.go; the wire protocol: e2e_groups_wire_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// groupDetail is GET /v1/groups/{group}, as the api package writes it.
type groupDetail = api.GroupDetail

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
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		var ok bool
		if d, ok = tryDescribe(t, c, group); ok {
			counts, total := assignedCounts(d)
			if len(counts) == members && total == partitions && !slices.Contains(counts, 0) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not stable with %d members over %d partitions after %v; last seen %+v", group, members, partitions, timeout, d)
		}
	}
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

// TestGroupFranzGo: three franz-go members share six partitions and read
// every record, once per assignor (the coordinator only relays what the
// leader's assignor computes).
func TestGroupFranzGo(t *testing.T) {
	n := kafkaNode(t)
	c := newAPIClient(t, n)
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "gfranz-"+tc.name, "franz-"+tc.name
			httpCreateTopic(t, n, topic, 6)
			const records = 3000
			produceIndexed(t, c, topic, 0, records)
			seen := newSeenSet()
			for i := range 3 {
				startFranzMember(t, n.KafkaAddr, group, topic, fmt.Sprintf("franz-%d", i), seen, true, kgo.Balancers(tc.balancer))
			}
			d := waitSpread(t, c, group, 3, 6, 30*time.Second)
			servertest.WaitFor(t, 30*time.Second, "every record consumed", func() bool { return seen.missing(records) == 0 })
			t.Logf("generation %d, per-member records %v, duplicates %d", d.Generation, seen.counts, seen.duplicates())
			if d.Protocol != tc.name {
				t.Errorf("protocol %q", d.Protocol)
			}
			for _, m := range d.Members {
				if m.Kind != "kafka" || m.ClientHost == "" || m.ClientID == "" {
					t.Errorf("member %+v", m)
				}
			}
			servertest.WaitFor(t, 20*time.Second, "lag 0", func() bool {
				d := describeGroup(t, c, group)
				return len(d.Offsets) == 6 && d.Lag == 0
			})
		})
	}
}

// TestGroupMemberKilled: a member cut off the network without leaving is
// expired after its session timeout; the others take its partitions and,
// committing manually, read every record it had not committed.
func TestGroupMemberKilled(t *testing.T) {
	// A 3 s session, below Kafka's (and runnel's) 6 s minimum, keeps the test short.
	n := servertest.Start(t, servertest.Options{Args: []string{"--group-min-session-timeout", "1s"}})
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
	// The bound tells an expired session from one never expired (the
	// killed member cannot leave, and the survivors' rebalance timeout is
	// franz-go's 60 s); how soon after the session timeout is logged, not
	// asserted: the rebalance that follows (heartbeats, joins and syncs of
	// two clients and a node) is scheduling-bound on a loaded 2-core
	// machine, and a margin of 5 s past the session was a timing
	// assertion.
	waitSpread(t, c, "kill-group", 2, 6, session+30*time.Second)
	t.Logf("survivors own every partition %v after the kill (session timeout %v)", time.Since(killed).Round(10*time.Millisecond), session)
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

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.seen.add(h.name, msg.Value)
		s.MarkMessage(msg, "")
	}
	return nil
}

// TestGroupKafkajs runs testdata/kafkajs/groups.js: three kafkajs consumers
// in one group share six partitions and read every record.
func TestGroupKafkajs(t *testing.T) {
	dir := filepath.Join("testdata", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		servertest.MissingTool(t, fmt.Sprintf("kafkajs not installed (npm ci in %s): %v", dir, err))
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
	servertest.WaitFor(t, 30*time.Second, "kafkajs commits to the end", func() bool {
		d, ok := tryDescribe(t, c, "kafkajs-group")
		return ok && len(d.Offsets) == 6 && d.Lag == 0
	})
}

// TestGroupKcat: two kcat -G (librdkafka's balanced consumer) processes in
// one group read every record between them.
func TestGroupKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		servertest.MissingTool(t, "kcat not installed")
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
