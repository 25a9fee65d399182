package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// Issue 18: the Kafka admin surface, through kadm, sarama's ClusterAdmin
// and raw requests, against real runnel processes.

func adminClient(t *testing.T, addrs ...string) (*kadm.Client, *kgo.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return kadm.NewClient(cl), cl, ctx
}

func mustCreateKafkaTopic(t *testing.T, adm *kadm.Client, ctx context.Context, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	r, err := adm.CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// topicConfig is a topic's config value and source as DescribeConfigs
// reports them.
func topicConfig(t *testing.T, adm *kadm.Client, ctx context.Context, topic, name string) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c.MaybeValue(), c.Source
		}
	}
	t.Fatalf("%s has no config %s", topic, name)
	return "", 0
}

// AlterConfigs (key 33) replaces a topic's whole dynamic config set;
// validate-only changes nothing; a bad value is INVALID_CONFIG.
func TestKafkaAdminAlterConfigsReplacesTheSet(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "replace", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("60000")})

	set := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}
	rs, err := adm.ValidateAlterTopicConfigsState(ctx, set, "replace")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, rs)
	}
	if v, src := topicConfig(t, adm, ctx, "replace", "retention.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("after validate-only: retention.ms %s (%v)", v, src)
	}
	if rs, err = adm.AlterTopicConfigsState(ctx, set, "replace"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, rs)
	}
	if v, src := topicConfig(t, adm, ctx, "replace", "cleanup.policy"); v != "compact" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy %s (%v)", v, src)
	}
	if _, src := topicConfig(t, adm, ctx, "replace", "retention.ms"); src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms not named: source %v, want the default", src)
	}
	bad := []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("soon")}}
	if rs, err = adm.AlterTopicConfigsState(ctx, bad, "replace"); err != nil || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v %+v", err, rs)
	}

	// Synonyms: the topic's value, then the broker default under Kafka's name.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.IncludeSynonyms = true
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "replace", ConfigNames: []string{"cleanup.policy"}}}
	dcr, err := dc.RequestWith(ctx, rawClient(t, n.KafkaAddr))
	if err != nil || len(dcr.Resources[0].Configs) != 1 {
		t.Fatalf("describe with synonyms: %v %+v", err, dcr)
	}
	if syn := dcr.Resources[0].Configs[0].ConfigSynonyms; len(syn) != 2 || syn[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		syn[1].Name != "log.cleanup.policy" || *syn[1].Value != "delete" || syn[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("cleanup.policy synonyms %+v", syn)
	}

	// sarama's ClusterAdmin.AlterConfig is the same call.
	sa := saramaAdmin(t, n.KafkaAddr)
	if err := sa.AlterConfig(sarama.TopicResource, "replace", map[string]*string{"retention.ms": kmsg.StringPtr("120000")}, false); err != nil {
		t.Fatalf("sarama AlterConfig: %v", err)
	}
	if v, _ := topicConfig(t, adm, ctx, "replace", "retention.ms"); v != "120000" {
		t.Fatalf("after sarama: retention.ms %s", v)
	}
	if _, src := topicConfig(t, adm, ctx, "replace", "cleanup.policy"); src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after sarama: cleanup.policy source %v, want the default", src)
	}
}

func rawClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func saramaAdmin(t *testing.T, addr string) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Admin.Timeout = 30 * time.Second
	sa, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close() })
	return sa
}

// DescribeLogDirs (key 35): the node's partitions directory, with the size
// of each replica it holds.
func TestKafkaAdminDescribeLogDirs(t *testing.T) {
	n := kafkaNode(t)
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "sized", 2, 1, nil)
	rec := &kgo.Record{Topic: "sized", Value: []byte(strings.Repeat("x", 1000))}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	var parts int
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil || !strings.HasPrefix(d.Dir, n.DataDir) || !filepath.IsAbs(d.Dir) {
			t.Errorf("dir %q err %v, want under %s", d.Dir, d.Err, n.DataDir)
		}
		for _, p := range d.Topics["sized"] {
			size += p.Size
			parts++
		}
	})
	if parts != 2 || size == 0 { // the producer compresses: some bytes, not 1000
		t.Fatalf("sized: %d partitions, %d bytes in %+v", parts, size, dirs)
	}
	// AlterReplicaLogDirs (key 34): one data dir, so only "move to where
	// it is" succeeds.
	var dir string
	dirs.Each(func(d kadm.DescribedLogDir) { dir = d.Dir })
	for _, tc := range []struct {
		dir  string
		part int32
		want error
	}{{dir, 0, nil}, {"/elsewhere", 0, kerr.LogDirNotFound}, {dir, 9, kerr.ReplicaNotAvailable}} {
		var req kadm.AlterReplicaLogDirsReq
		req.Add(tc.dir, kadm.TopicsSet{"sized": {tc.part: {}}})
		rs, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, req)
		if err != nil || !errors.Is(rs["sized"][tc.part].Err, tc.want) || (tc.want == nil) != (rs["sized"][tc.part].Err == nil) {
			t.Errorf("move sized-%d to %s: %v %+v, want %v", tc.part, tc.dir, err, rs, tc.want)
		}
	}
	sa := saramaAdmin(t, n.KafkaAddr)
	sdirs, err := sa.DescribeLogDirs([]int32{1})
	if err != nil || len(sdirs[1]) != 1 || sdirs[1][0].Path == "" {
		t.Fatalf("sarama DescribeLogDirs: %v %+v", err, sdirs)
	}
}

// ElectLeaders (key 43), AlterPartitionReassignments (45) and
// ListPartitionReassignments (46) on one node: nothing to elect or move,
// and the error paths answer Kafka's codes.
func TestKafkaAdminElectAndReassignErrors(t *testing.T) {
	n := kafkaNode(t)
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "placed", 2, 1, nil)

	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		res, err := adm.ElectLeaders(ctx, how, kadm.TopicsSet{"placed": {0: {}, 1: {}}})
		if err != nil {
			t.Fatal(err)
		}
		for p, r := range res["placed"] {
			if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Errorf("how %v, partition %d: %v, want ELECTION_NOT_NEEDED", how, p, r.Err)
			}
		}
	}
	el := kmsg.NewPtrElectLeadersRequest()
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "placed", Partitions: []int32{5}}}
	elr, err := el.RequestWith(ctx, cl)
	if err != nil || elr.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("elect partition 5: %v %+v", err, elr)
	}

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("placed", 0, []int32{9}) // no broker 9
	req.Assign("placed", 7, []int32{1}) // no partition 7
	req.CancelAssign("placed", 1)       // nothing to cancel
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]error{0: kerr.InvalidReplicaAssignment, 7: kerr.UnknownTopicOrPartition, 1: kerr.NoReassignmentInProgress}
	for p, code := range want {
		if got := res["placed"][p].Err; !errors.Is(got, code) {
			t.Errorf("partition %d: %v, want %v", p, got, code)
		}
	}
	listed, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(listed) != 0 {
		t.Fatalf("list: %v %+v", err, listed)
	}
	// sarama's ClusterAdmin makes the same calls.
	sa := saramaAdmin(t, n.KafkaAddr)
	sres, err := sa.ElectLeaders(sarama.PreferredElection, map[string][]int32{"placed": {0}})
	if err != nil || sres["placed"][0] == nil || sres["placed"][0].ErrorCode != sarama.ErrElectionNotNeeded {
		t.Fatalf("sarama ElectLeaders: %v %+v", err, sres)
	}
	if err := sa.AlterPartitionReassignments("placed", [][]int32{{9}}); err == nil {
		t.Fatal("sarama AlterPartitionReassignments to broker 9: no error")
	}
	if st, err := sa.ListPartitionReassignments("placed", []int32{0, 1}); err != nil || len(st["placed"]) != 0 {
		t.Fatalf("sarama ListPartitionReassignments: %v %+v", err, st)
	}

	// A no-op reassignment to the current replicas succeeds.
	var same kadm.AlterPartitionAssignmentsReq
	same.Assign("placed", 0, []int32{1})
	if res, err := adm.AlterPartitionAssignments(ctx, same); err != nil || res["placed"][0].Err != nil {
		t.Fatalf("reassign to the same replicas: %v %+v", err, res)
	}
}

// DescribeQuorum (key 55) and DescribeTopicPartitions (key 75) answer
// from the raft status and the metadata.
func TestKafkaAdminDescribeQuorumAndTopicPartitions(t *testing.T) {
	n := kafkaNode(t)
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "paged", 3, 1, nil)

	q := kmsg.NewPtrDescribeQuorumRequest()
	q.Version = 1
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic, qt.Partitions = "__cluster_metadata", []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	q.Topics = append(q.Topics, qt)
	qr := rawRoundTrip(t, rawDial(t, n.KafkaAddr), q).(*kmsg.DescribeQuorumResponse)
	if qr.ErrorCode != 0 || len(qr.Topics) != 1 {
		t.Fatalf("quorum %+v", qr)
	}
	p := qr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark < 1 ||
		len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || p.CurrentVoters[0].LogEndOffset < p.HighWatermark {
		t.Fatalf("quorum partition %+v", p)
	}

	d := kmsg.NewPtrDescribeTopicPartitionsRequest()
	d.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "paged"}, {Topic: "nope"}}
	d.ResponsePartitionLimit = 2
	dr, err := d.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dr.Topics) != 2 || dr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		len(dr.Topics[1].Partitions) != 2 || dr.NextCursor == nil || dr.NextCursor.Partition != 2 {
		t.Fatalf("first page %+v", dr)
	}
	d.Topics = d.Topics[:1]
	d.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "paged", Partition: 2}
	if dr, err = d.RequestWith(ctx, cl); err != nil || len(dr.Topics[0].Partitions) != 1 ||
		dr.Topics[0].Partitions[0].LeaderID != 1 || dr.NextCursor != nil {
		t.Fatalf("second page %v %+v", err, dr)
	}
}

// On three nodes: Kafka ElectLeaders moves leadership back to the
// preferred replica (the path HTTP elect-leaders takes), a reassignment
// started over Kafka moves a partition and is listed until done, and
// DescribeQuorum lists the three voters.
func TestKafkaAdminClusterElectReassignQuorum(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: append(fastSessions, "--leader-rebalance-interval", "0")})
	createReplicatedTopic(t, c.Node(1), "pref")
	ps, _ := describe(c.Node(1), "pref")
	preferred := ps[0].Replicas[0]
	other := c.Node(int(preferred)%3 + 1)
	c.Node(int(preferred)).Kill()
	servertest.WaitFor(t, 30*time.Second, "leadership moved off the killed preferred replica", func() bool {
		ps, ok := describe(other, "pref")
		return ok && ps[0].Leader > 0 && ps[0].Leader != preferred
	})
	c.Node(int(preferred)).Start()
	servertest.WaitFor(t, 30*time.Second, "the preferred replica back in sync", func() bool {
		ps, ok := describe(other, "pref")
		return ok && len(ps[0].ISR) == 3
	})
	adm, cl, ctx := adminClient(t, other.KafkaAddr)
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"pref": {0: {}}})
	if err != nil || res["pref"][0].Err != nil {
		t.Fatalf("elect preferred: %v %+v", err, res)
	}
	servertest.WaitFor(t, 30*time.Second, "the preferred replica leads (on the node asked)", func() bool {
		ps, ok := describe(other, "pref")
		return ok && ps[0].Leader == preferred
	})
	if res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"pref": {0: {}}}); err != nil ||
		!errors.Is(res["pref"][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("elect again: %v %+v", err, res)
	}

	// Reassign an RF=2 partition to include the third broker.
	mustCreateKafkaTopic(t, adm, ctx, "moved", 1, 2, nil)
	var replicas []int32
	servertest.WaitFor(t, 30*time.Second, "moved has two replicas in sync", func() bool {
		ps, ok := describe(other, "moved")
		replicas = nil
		if ok {
			replicas = ps[0].Replicas
		}
		return ok && len(ps[0].ISR) == 2
	})
	target := []int32{replicas[1], 6 - replicas[0] - replicas[1]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moved", 0, target)
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res["moved"][0].Err != nil {
		t.Fatalf("reassign to %v: %v %+v", target, err, res)
	}
	servertest.WaitFor(t, 60*time.Second, "the reassignment done and no longer listed", func() bool {
		ps, ok := describe(other, "moved")
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moved": {0: {}}})
		return ok && err == nil && len(listed) == 0 && sortedEqual(ps[0].Replicas, target)
	})

	q := kmsg.NewPtrDescribeQuorumRequest()
	q.Version = 2
	q.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	qr, err := q.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var cluster clusterView
	httpGetJSON(t, other.URL+"/v1/cluster", &cluster)
	if p := qr.Topics[0].Partitions[0]; len(p.CurrentVoters) != 3 || p.LeaderID != cluster.LeaderID || len(qr.Nodes) != 3 {
		t.Fatalf("quorum %+v, cluster leader %d", p, cluster.LeaderID)
	}

	// An explicit assignment is kept as given, order (preferred leader) too.
	want := [][]int32{{2, 3}, {3, 1}}
	if got := createAssigned(t, ctx, cl, "ordered", false, want...); got.ErrorCode != 0 {
		t.Fatalf("create ordered: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if code := growAssigned(t, ctx, cl, "ordered", 3, []int32{1, 2}); code != 0 {
		t.Fatalf("grow ordered: %v", kerr.ErrorForCode(code))
	}
	want = append(want, []int32{1, 2})
	servertest.WaitFor(t, 20*time.Second, "ordered placed as asked", func() bool {
		ps, ok := describe(other, "ordered")
		if !ok || len(ps) != 3 {
			return false
		}
		for i := range ps {
			if !slices.Equal(ps[i].Replicas, want[i]) {
				return false
			}
		}
		return true
	})
}

func sortedEqual(a, b []int32) bool { return slices.Equal(sortedIDs(a), sortedIDs(b)) }

// A broker's configs: DescribeConfigs lists the serve flags under their
// Kafka names with their sources; log.level changes at run time (and
// validate-only does not change it); a read-only config is INVALID_CONFIG;
// another broker's id is INVALID_REQUEST.
func TestKafkaAdminBrokerConfigs(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--replica-lag-time-max", "7s"}})
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	brokerConfig := func(name string) (string, kmsg.ConfigSource, bool) {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe broker 1: %v %+v", err, resp)
		}
		for _, c := range resp.Resources[0].Configs {
			if c.Name == name && c.Value != nil {
				return *c.Value, c.Source, c.ReadOnly
			}
		}
		t.Fatalf("broker 1 has no config %s (of %d)", name, len(resp.Resources[0].Configs))
		return "", 0, false
	}
	// kadm reads the same list.
	if rcs, err := adm.DescribeBrokerConfigs(ctx, 1); err != nil || rcs[0].Err != nil || len(rcs[0].Configs) < 25 {
		t.Fatalf("kadm DescribeBrokerConfigs: %v %+v", err, rcs)
	}
	if v, src, ro := brokerConfig("replica.lag.time.max.ms"); v != "7000" || src != kmsg.ConfigSourceStaticBrokerConfig || !ro {
		t.Fatalf("replica.lag.time.max.ms %s %v read-only %v", v, src, ro)
	}
	if v, src, _ := brokerConfig("broker.session.timeout.ms"); v != "9000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("broker.session.timeout.ms %s %v", v, src)
	}
	if v, src, _ := brokerConfig("log.segment.bytes"); v != "1073741824" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("log.segment.bytes %s %v", v, src)
	}
	if v, _, _ := brokerConfig("log.dirs"); v != n.DataDir {
		t.Fatalf("log.dirs %s, want %s", v, n.DataDir)
	}

	debug := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.level", Value: kmsg.StringPtr("debug")}}
	if rs, err := adm.ValidateAlterBrokerConfigs(ctx, debug, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("validate log.level: %v %+v", err, rs)
	}
	if v, src, _ := brokerConfig("log.level"); v != "info" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after validate-only: log.level %s %v", v, src)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, debug, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("set log.level: %v %+v", err, rs)
	}
	if v, src, ro := brokerConfig("log.level"); v != "debug" || src != kmsg.ConfigSourceDynamicBrokerConfig || ro {
		t.Fatalf("log.level %s %v read-only %v", v, src, ro)
	}
	// The node logs at debug now: its HTTP host check logs refusals at debug.
	mustCreateKafkaTopic(t, adm, ctx, "debugged", 1, 1, nil)
	servertest.WaitFor(t, 30*time.Second, "a debug line in the node's log", func() bool {
		return strings.Contains(n.Logs(), "level=DEBUG")
	})
	reset := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.level"}}
	if rs, err := adm.AlterBrokerConfigs(ctx, reset, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("delete log.level: %v %+v", err, rs)
	}
	if v, src, _ := brokerConfig("log.level"); v != "info" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after delete: log.level %s %v", v, src)
	}

	for _, c := range []struct {
		name, value string
		want        error
	}{
		{"replica.lag.time.max.ms", "1000", kerr.InvalidConfig},
		{"no.such.config", "1", kerr.InvalidConfig},
		{"log.level", "loud", kerr.InvalidConfig},
	} {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: c.name, Value: kmsg.StringPtr(c.value)}}, 1)
		if err != nil || !errors.Is(rs[0].Err, c.want) {
			t.Errorf("set %s=%s: %v %+v, want %v", c.name, c.value, err, rs, c.want)
		}
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	req.Resources = append(req.Resources, res)
	// (raw: kgo would route it to broker 2, which does not exist)
	if resp := rawRoundTrip(t, rawDial(t, n.KafkaAddr), req).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("alter broker 2 on broker 1: %+v", resp)
	}
	// BROKER_LOGGER (kafka-configs --entity-type broker-loggers): the root
	// logger is log.level under Kafka's level names.
	loggerReq := func(level *string) *kmsg.IncrementalAlterConfigsRequest {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "root", level
		if level == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		return req
	}
	if resp, err := loggerReq(kmsg.StringPtr("TRACE")).RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("root logger TRACE: %v %+v", err, resp)
	}
	if v, src, _ := brokerConfig("log.level"); v != "debug-4" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("after root=TRACE: log.level %s %v", v, src)
	}
	dl := kmsg.NewPtrDescribeConfigsRequest()
	dl.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "1"}}
	if resp, err := dl.RequestWith(ctx, cl); err != nil || len(resp.Resources[0].Configs) != 1 || *resp.Resources[0].Configs[0].Value != "TRACE" {
		t.Fatalf("describe loggers: %v %+v", err, resp)
	}
	if resp, err := loggerReq(kmsg.StringPtr("LOUD")).RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("root logger LOUD: %v %+v", err, resp)
	}
	if resp, err := loggerReq(nil).RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("root logger delete: %v %+v", err, resp)
	}

	// The legacy AlterConfigs replaces the set: naming nothing resets log.level.
	if rs, err := adm.AlterBrokerConfigs(ctx, debug, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("set log.level again: %v %+v", err, rs)
	}
	if rs, err := adm.AlterBrokerConfigsState(ctx, nil, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("AlterConfigs with no configs: %v %+v", err, rs)
	}
	if v, _, _ := brokerConfig("log.level"); v != "info" {
		t.Fatalf("after AlterConfigs {}: log.level %s", v)
	}
}

// createAssigned sends CreateTopics with an explicit replica assignment.
func createAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, name string, validateOnly bool, as ...[]int32) *kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = 30000, validateOnly
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p, r := range as {
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: r})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return &resp.Topics[0]
}

// growAssigned sends CreatePartitions with the new partitions' replicas.
func growAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, name string, count int32, as ...[]int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, count
	for _, r := range as {
		rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode
}

// CreateTopics and CreatePartitions with explicit replica assignments on
// one node: placed as asked; unknown brokers, a broker twice, an
// inconsistent replication factor or a wrong count are
// INVALID_REPLICA_ASSIGNMENT; validate-only creates nothing.
func TestKafkaAdminExplicitAssignments(t *testing.T) {
	n := kafkaNode(t)
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	if got := createAssigned(t, ctx, cl, "placed", true, []int32{1}, []int32{1}); got.ErrorCode != 0 || got.NumPartitions != 2 {
		t.Fatalf("validate only: %+v", got)
	}
	if _, ok := describe(n, "placed"); ok {
		t.Fatal("validate-only created the topic")
	}
	if got := createAssigned(t, ctx, cl, "placed", false, []int32{1}, []int32{1}); got.ErrorCode != 0 || got.NumPartitions != 2 || got.ReplicationFactor != 1 {
		t.Fatalf("create: %+v", got)
	}
	for name, as := range map[string][][]int32{
		"unknown-broker": {{9}},
		"twice":          {{1, 1}},
		"uneven":         {{1}, {}},
	} {
		if got := createAssigned(t, ctx, cl, name, false, as...); got.ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Errorf("%s %v: %v, want INVALID_REPLICA_ASSIGNMENT", name, as, kerr.ErrorForCode(got.ErrorCode))
		}
	}
	if code := growAssigned(t, ctx, cl, "placed", 4, []int32{1}); code != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("2 new partitions, 1 assignment: %v", kerr.ErrorForCode(code))
	}
	if code := growAssigned(t, ctx, cl, "placed", 3, []int32{9}); code != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("new partition on broker 9: %v", kerr.ErrorForCode(code))
	}
	if code := growAssigned(t, ctx, cl, "placed", 3, []int32{1}); code != 0 {
		t.Fatalf("grow to 3: %v", kerr.ErrorForCode(code))
	}
	td, err := adm.ListTopics(ctx, "placed")
	if err != nil || len(td["placed"].Partitions) != 3 {
		t.Fatalf("placed: %v %+v", err, td)
	}
}

// joinWithSession sends a raw JoinGroup asking for a session timeout.
func joinWithSession(t *testing.T, addr string, sessionMs int32, protocolType string) int16 {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "bounded", sessionMs, 10000, protocolType
	if protocolType != "" {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
	}
	return rawRoundTrip(t, rawDial(t, addr), req).(*kmsg.JoinGroupResponse).ErrorCode
}

// Session timeouts outside --group-min/max-session-timeout (6 s and
// 30 min by default) are INVALID_SESSION_TIMEOUT, checked before the
// protocol; HTTP members get a 400.
func TestKafkaGroupSessionTimeoutBounds(t *testing.T) {
	n := kafkaNode(t)
	servertest.WaitFor(t, 30*time.Second, "the group coordinator answers", func() bool {
		return joinWithSession(t, n.KafkaAddr, 5999, "consumer") == kerr.InvalidSessionTimeout.Code
	})
	if code := joinWithSession(t, n.KafkaAddr, 5999, ""); code != kerr.InvalidSessionTimeout.Code {
		t.Errorf("5.999 s and no protocol: %v, want INVALID_SESSION_TIMEOUT first", kerr.ErrorForCode(code))
	}
	if code := joinWithSession(t, n.KafkaAddr, 30*60*1000+1, "consumer"); code != kerr.InvalidSessionTimeout.Code {
		t.Errorf("30 min + 1 ms: %v", kerr.ErrorForCode(code))
	}
	if code := joinWithSession(t, n.KafkaAddr, 6000, "consumer"); code != kerr.MemberIDRequired.Code {
		t.Errorf("6 s: %v, want MEMBER_ID_REQUIRED (accepted, v4+ first join)", kerr.ErrorForCode(code))
	}
	httpCreateTopic(t, n, "bounded-topic", 1)
	newAPIClient(t, n).problem("POST", "/v1/groups/bounded-http/members", "application/json",
		[]byte(`{"topics":["bounded-topic"],"session_timeout_ms":1000}`), 400, "invalid-request")

	m := servertest.Start(t, servertest.Options{Args: []string{"--group-min-session-timeout", "1s", "--group-max-session-timeout", "10s"}})
	servertest.WaitFor(t, 30*time.Second, "the group coordinator answers", func() bool {
		return joinWithSession(t, m.KafkaAddr, 1000, "consumer") == kerr.MemberIDRequired.Code
	})
	if code := joinWithSession(t, m.KafkaAddr, 10001, "consumer"); code != kerr.InvalidSessionTimeout.Code {
		t.Errorf("10.001 s with a 10 s maximum: %v", kerr.ErrorForCode(code))
	}
}

// Kafka's topic config set: the configs runnel does not act on are
// accepted with Kafka's bounds, stored and described read-only with the
// reason; segment.bytes goes down to Kafka's 14 and such a topic still
// takes and serves records.
func TestKafkaAdminTopicConfigSet(t *testing.T) {
	n := kafkaNode(t)
	adm, cl, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "tiny", 1, 1, map[string]*string{
		"segment.bytes":                           kmsg.StringPtr("14"),
		"compression.type":                        kmsg.StringPtr("lz4"),
		"min.cleanable.dirty.ratio":               kmsg.StringPtr("0.1"),
		"leader.replication.throttled.replicas":   kmsg.StringPtr("0:1"),
		"message.timestamp.difference.max.ms":     kmsg.StringPtr("60000"),
		"follower.replication.throttled.replicas": kmsg.StringPtr("*"),
	})
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tiny", Value: []byte(strings.Repeat("v", i+1))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var ps []partitionView
	servertest.WaitFor(t, 30*time.Second, "five records in tiny", func() bool {
		ps, _ = describe(n, "tiny")
		return len(ps) == 1 && ps[0].HighWatermark == 5
	})
	if v, src := topicConfig(t, adm, ctx, "tiny", "compression.type"); v != "lz4" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("compression.type %s %v", v, src)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "tiny", []string{"preallocate", "segment.bytes"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources[0].Configs) != 2 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	for _, c := range resp.Resources[0].Configs {
		doc := ""
		if c.Documentation != nil {
			doc = *c.Documentation
		}
		notApplied := strings.Contains(doc, "not applied")
		if c.ReadOnly != (c.Name == "preallocate") || notApplied != c.ReadOnly {
			t.Errorf("%s: read-only %v, documentation %q", c.Name, c.ReadOnly, doc)
		}
	}
	for _, bad := range []struct{ name, value string }{
		{"segment.bytes", "13"},
		{"compression.type", "brotli"},
		{"compression.zstd.level", "23"},
		{"min.cleanable.dirty.ratio", "1.5"},
		{"leader.replication.throttled.replicas", "zero"},
		{"remote.storage.enable", "true"},
		{"segment.index.bytes", "3"},
		{"local.retention.ms", "-3"},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: bad.name, Value: kmsg.StringPtr(bad.value)}}, "tiny")
		if err != nil || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Errorf("%s=%s: %v %+v, want INVALID_CONFIG", bad.name, bad.value, err, rs)
		}
	}
}

// DescribeProducers (key 61): the idempotent producer that wrote a
// partition is listed with its last sequence; a partition without one
// lists none.
func TestKafkaAdminDescribeProducers(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "produced", 2, 1, nil)
	prod, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "produced", Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"produced": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []kadm.DescribedProducer
	ds.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Errorf("partition %d: %v", p.Partition, p.Err)
		}
	})
	ds.EachProducer(func(p kadm.DescribedProducer) { got = append(got, p) })
	if len(got) != 1 || got[0].Partition != 0 || got[0].LastSequence != 2 || got[0].ProducerID < 0 || got[0].LastTimestamp <= 0 {
		t.Fatalf("producers %+v", got)
	}
}

// IncrementalAlterConfigs APPEND and SUBTRACT on a list topic config
// build on its current (or default) value; on a non-list config they are
// INVALID_CONFIG.
func TestKafkaAdminListConfigOps(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "listed", 1, 1, nil)
	alter := func(op kadm.IncrementalOp, name, value string) error {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: kmsg.StringPtr(value)}}, "listed")
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].Err
	}
	if err := alter(kadm.AppendConfig, "cleanup.policy", "compact"); err != nil {
		t.Fatalf("append compact: %v", err)
	}
	if v, _ := topicConfig(t, adm, ctx, "listed", "cleanup.policy"); v != "delete,compact" {
		t.Fatalf("after append: cleanup.policy %q", v)
	}
	if err := alter(kadm.SubtractConfig, "cleanup.policy", "delete"); err != nil {
		t.Fatalf("subtract delete: %v", err)
	}
	if v, _ := topicConfig(t, adm, ctx, "listed", "cleanup.policy"); v != "compact" {
		t.Fatalf("after subtract: cleanup.policy %q", v)
	}
	// The state machine applies the op to the topic's value; a policy
	// left empty is refused there.
	if err := alter(kadm.SubtractConfig, "cleanup.policy", "compact"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("subtract the last policy: %v, want INVALID_CONFIG", err)
	}
	if err := alter(kadm.AppendConfig, "leader.replication.throttled.replicas", "0:1"); err != nil {
		t.Fatalf("append throttled replica: %v", err)
	}
	if err := alter(kadm.AppendConfig, "retention.ms", "5"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("append to retention.ms: %v, want INVALID_CONFIG", err)
	}
}

// Unclean ElectLeaders: a partition whose only in-sync replica is down
// stays offline while its topic forbids unclean elections
// (ELIGIBLE_LEADERS_NOT_AVAILABLE), and gets the out-of-sync replica as
// leader once the topic allows it. The partition lives on two broker-only
// nodes, so the quorum survives both going down.
func TestKafkaAdminUncleanElection(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Brokers: 2,
		Args: append(fastSessions, "--leader-rebalance-interval", "0", "--replica-lag-time-max", "2s")})
	adm, cl, ctx := adminClient(t, c.Node(1).KafkaAddr)
	servertest.WaitFor(t, 30*time.Second, "brokers 4 and 5 registered", func() bool {
		return createAssigned(t, ctx, cl, "risky", false, []int32{4, 5}).ErrorCode == 0
	})
	servertest.WaitFor(t, 30*time.Second, "both replicas in sync", func() bool {
		ps, ok := describe(c.Node(1), "risky")
		return ok && len(ps[0].ISR) == 2
	})
	c.Node(5).Kill()
	servertest.WaitFor(t, 30*time.Second, "5 out of the ISR", func() bool {
		ps, ok := describe(c.Node(1), "risky")
		return ok && len(ps[0].ISR) == 1 && ps[0].ISR[0] == 4
	})
	c.Node(4).Kill()
	c.Node(5).Start()
	servertest.WaitFor(t, 30*time.Second, "risky offline, 5 back but out of sync", func() bool {
		ps, ok := describe(c.Node(1), "risky")
		var cluster api.Cluster
		httpGetJSON(t, c.Node(1).URL+"/v1/cluster", &cluster)
		alive5 := false
		for _, b := range cluster.Brokers {
			alive5 = alive5 || (b.ID == 5 && b.State == "alive")
		}
		return ok && ps[0].Leader == -1 && alive5
	})
	elect := func() error {
		t.Helper()
		res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"risky": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		return res["risky"][0].Err
	}
	if err := elect(); !errors.Is(err, kerr.EligibleLeadersNotAvailable) {
		t.Fatalf("unclean election, topic forbids: %v", err)
	}
	allow := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kmsg.StringPtr("true")}}
	if rs, err := adm.AlterTopicConfigs(ctx, allow, "risky"); err != nil || rs[0].Err != nil {
		t.Fatalf("allow unclean: %v %+v", err, rs)
	}
	if err := elect(); err != nil {
		t.Fatalf("unclean election, topic allows: %v", err)
	}
	servertest.WaitFor(t, 20*time.Second, "5 leads risky", func() bool {
		ps, ok := describe(c.Node(1), "risky")
		return ok && ps[0].Leader == 5
	})
}

// Issue 18: sarama's ClusterAdmin for the calls the other tests here don't
// make with it, in order on one node: topics, partitions, records, configs,
// groups and offsets, cluster and quotas.
func TestSaramaClusterAdminCalls(t *testing.T) {
	n := kafkaNode(t)
	sa := saramaAdmin(t, n.KafkaAddr)
	const topic, group = "sa-admin", "sa-group"
	kc, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"CreateTopic/ListTopics/DescribeTopics", func(t *testing.T) {
			if err := sa.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
			ts, err := sa.ListTopics()
			if err != nil || ts[topic].NumPartitions != 2 {
				t.Fatalf("list: %v %+v", err, ts[topic])
			}
			md, err := sa.DescribeTopics([]string{topic, "sa-none"})
			if err != nil || len(md) != 2 || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) != 2 ||
				md[1].Err != sarama.ErrUnknownTopicOrPartition {
				t.Fatalf("describe: %v %+v", err, md)
			}
		}},
		{"CreatePartitions", func(t *testing.T) {
			if err := sa.CreatePartitions(topic, 3, nil, false); err != nil {
				t.Fatal(err)
			}
			if md, err := sa.DescribeTopics([]string{topic}); err != nil || len(md[0].Partitions) != 3 {
				t.Fatalf("describe after growing: %v %+v", err, md)
			}
			if err := sa.CreatePartitions(topic, 2, nil, false); !errors.Is(err, sarama.ErrInvalidPartitions) {
				t.Fatalf("shrink: %v", err)
			}
		}},
		{"ListOffsets/DeleteRecords", func(t *testing.T) {
			for i := range 3 {
				if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if err := sa.DeleteRecords(topic, map[int32]int64{0: 2}); err != nil {
				t.Fatal(err)
			}
			for ts, want := range map[int64]int64{sarama.OffsetOldest: 2, sarama.OffsetNewest: 3} {
				r, err := sa.ListOffsets(map[string]map[int32]int64{topic: {0: ts}}, nil)
				if err != nil || r[topic][0].Err != sarama.ErrNoError || r[topic][0].Offset != want {
					t.Fatalf("offset at %d: %v %+v, want %d", ts, err, r[topic][0], want)
				}
			}
		}},
		{"DescribeConfigs/IncrementalAlterConfig", func(t *testing.T) {
			v := "7200000"
			if err := sa.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
				"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false); err != nil {
				t.Fatal(err)
			}
			one, err := sa.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}}},
				sarama.DescribeConfigsOptions{})
			if err != nil || len(one) != 1 || one[0].ErrorCode != 0 || len(one[0].Configs) != 1 {
				t.Fatalf("describe retention.ms: %v %+v", err, one)
			}
			if e := one[0].Configs[0]; e.Name != "retention.ms" || e.Value != v || e.Source != sarama.SourceTopic {
				t.Fatalf("describe retention.ms: %+v", e)
			}
			rs, err := sa.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic},
				{Type: sarama.BrokerResource, Name: "1"}}, sarama.DescribeConfigsOptions{})
			if err != nil || len(rs) != 2 {
				t.Fatalf("describe both: %v %+v", err, rs)
			}
			for _, r := range rs {
				if r.ErrorCode != 0 || len(r.Configs) == 0 {
					t.Fatalf("%d %s: %+v", r.Type, r.Name, r)
				}
			}
		}},
		{"consumer group offsets", func(t *testing.T) {
			if _, err := sa.AlterConsumerGroupOffsets(group, map[string]map[int32]sarama.OffsetAndMetadata{topic: {0: {Offset: 2}, 1: {Offset: 0}}}, nil); err != nil {
				t.Fatal(err)
			}
			gs, err := sa.ListConsumerGroups()
			if _, ok := gs[group]; err != nil || !ok {
				t.Fatalf("list groups: %v %+v", err, gs)
			}
			ds, err := sa.DescribeConsumerGroups([]string{group})
			if err != nil || len(ds) != 1 || ds[0].State != "Empty" || ds[0].Err != sarama.ErrNoError {
				t.Fatalf("describe groups: %v %+v", err, ds)
			}
			offs, err := sa.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
			if err != nil || offs.GetBlock(topic, 0).Offset != 2 || offs.GetBlock(topic, 1).Offset != 0 {
				t.Fatalf("group offsets: %v %+v", err, offs)
			}
			if err := sa.DeleteConsumerGroupOffset(group, topic, 1); err != nil {
				t.Fatal(err)
			}
			if offs, err = sa.ListConsumerGroupOffsets(group, map[string][]int32{topic: {1}}); err != nil || offs.GetBlock(topic, 1).Offset != -1 {
				t.Fatalf("after deleting the offset: %v %+v", err, offs.GetBlock(topic, 1))
			}
			if err := sa.DeleteConsumerGroup(group); err != nil {
				t.Fatal(err)
			}
			if gs, err = sa.ListConsumerGroups(); err != nil || len(gs) != 0 {
				t.Fatalf("after deleting the group: %v %+v", err, gs)
			}
		}},
		{"DescribeCluster/Controller/Coordinator", func(t *testing.T) {
			bs, controller, err := sa.DescribeCluster()
			if err != nil || len(bs) != 1 || bs[0].ID() != 1 || controller != 1 {
				t.Fatalf("%v %v %d", err, bs, controller)
			}
			if b, err := sa.Controller(); err != nil || b.ID() != 1 {
				t.Fatalf("controller: %v", err)
			}
			if b, err := sa.Coordinator(group); err != nil || b.ID() != 1 {
				t.Fatalf("coordinator: %v", err)
			}
		}},
		{"DescribeClientQuotas", func(t *testing.T) {
			if _, err := sa.DescribeClientQuotas(nil, false); err != nil {
				t.Fatal(err)
			}
		}},
		{"DeleteTopic", func(t *testing.T) {
			if err := sa.DeleteTopic(topic); err != nil {
				t.Fatal(err)
			}
			if ts, err := sa.ListTopics(); err != nil || ts[topic].NumPartitions != 0 {
				t.Fatalf("after delete: %v %+v", err, ts[topic])
			}
			if err := sa.DeleteTopic(topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				t.Fatalf("delete again: %v", err)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}
