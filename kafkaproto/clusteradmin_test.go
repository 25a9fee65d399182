package kafkaproto

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The memBroker's ClusterAdmin: every election succeeds, reassignments
// are recorded, one log dir holds every partition, a one-voter quorum.

func (b *memBroker) ElectLeaders(_ context.Context, topic string, partitions []int32, _ bool) (map[int32]error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, topic)
	}
	out := map[int32]error{}
	if partitions == nil {
		for i := range t.parts {
			out[int32(i)] = nil
		}
	}
	for _, p := range partitions {
		if p < 0 || int(p) >= len(t.parts) {
			out[p] = ErrUnknownTopicOrPartition
		} else {
			out[p] = nil
		}
	}
	return out, nil
}

func (b *memBroker) ReassignPartition(_ context.Context, topic string, partition int32, replicas []int32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	switch {
	case !ok || partition < 0 || int(partition) >= len(t.parts):
		return ErrUnknownTopicOrPartition
	case replicas == nil:
		return ErrNoReassignmentInProgress
	case len(replicas) != 1 || replicas[0] != 1:
		return ErrInvalidReplicaAssignment
	}
	return nil
}

func (b *memBroker) LogDirs(context.Context) ([]LogDir, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := LogDir{Path: "/data/partitions", TotalBytes: 1 << 30, FreeBytes: 1 << 29}
	for _, t := range b.cluster.Topics {
		for i, p := range b.topics[t.Name].parts {
			var size int64
			for _, batch := range p.batches {
				size += int64(len(batch))
			}
			d.Partitions = append(d.Partitions, LogDirPartition{Topic: t.Name, Partition: int32(i), Size: size})
		}
	}
	return []LogDir{d}, nil
}

func (b *memBroker) Quorum(context.Context) (Quorum, error) {
	return Quorum{LeaderID: 1, LeaderEpoch: 2, HighWatermark: 10,
		Voters: []QuorumReplica{{ID: 1, LogEndOffset: 10, LastFetchMs: -1, LastCaughtUpMs: -1}}}, nil
}

func (b *memBroker) ActiveProducers(_ context.Context, topic string, partition int32) ([]ActiveProducer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return nil, err
	}
	var out []ActiveProducer
	for id, seq := range p.lastSeq {
		out = append(out, ActiveProducer{ID: id, LastSequence: seq, LastTimestamp: -1})
	}
	return out, nil
}

// adminSweepRequest returns a valid request of a cluster admin key.
func adminSweepRequest(key, _ int16, topic string) kmsg.Request {
	switch key {
	case int16(kmsg.ListConfigResources):
		return kmsg.NewPtrListConfigResourcesRequest()
	case int16(kmsg.AlterConfigs):
		r := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
		res.Configs = append(res.Configs, c)
		r.Resources = append(r.Resources, res)
		return r
	case int16(kmsg.DescribeLogDirs):
		return kmsg.NewPtrDescribeLogDirsRequest()
	case int16(kmsg.ElectLeaders):
		r := kmsg.NewPtrElectLeadersRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewElectLeadersRequestTopic()
		t.Topic, t.Partitions = topic, []int32{0, 1}
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.AlterPartitionAssignments):
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		t.Topic = topic
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition, p.Replicas = 0, []int32{1}
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.ListPartitionReassignments):
		r := kmsg.NewPtrListPartitionReassignmentsRequest()
		r.TimeoutMillis = 5000
		return r
	case int16(kmsg.DescribeQuorum):
		r := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.UpdateFeatures):
		r := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "metadata.version", 21, 1 // the finalized level: a no-op
		r.FeatureUpdates = append(r.FeatureUpdates, u)
		return r
	case int16(kmsg.AlterReplicaLogDirs):
		r := kmsg.NewPtrAlterReplicaLogDirsRequest()
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = "/data/partitions"
		d.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: topic, Partitions: []int32{0}}}
		r.Dirs = append(r.Dirs, d)
		return r
	case int16(kmsg.DescribeProducers):
		r := kmsg.NewPtrDescribeProducersRequest()
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		return r
	case describeTopicPartitionsKey:
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: topic}}
		return r
	}
	panic(fmt.Sprintf("no admin sweep request for key %d", key))
}

// TestClusterAdminAnswers checks the content of the admin answers beyond
// "no error" against the in-memory broker.
func TestClusterAdminAnswers(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	mustCreate(t, b, "a", 3)
	mustCreate(t, b, "b", 2)
	if _, err := b.Produce(context.Background(), "a", 1, testBatch(2, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)

	dirs := roundTrip(t, c, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	if len(dirs.Dirs) != 1 || len(dirs.Dirs[0].Topics) != 2 || dirs.Dirs[0].Topics[0].Partitions[1].Size == 0 {
		t.Fatalf("log dirs %+v", dirs)
	}

	// Paging: 4 partitions per answer over 5 partitions of two topics.
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 4
	page := roundTrip(t, c, dtp).(*kmsg.DescribeTopicPartitionsResponse)
	if len(page.Topics) != 2 || len(page.Topics[1].Partitions) != 1 || page.NextCursor == nil ||
		page.NextCursor.Topic != "b" || page.NextCursor.Partition != 1 {
		t.Fatalf("first page %+v", page)
	}
	dtp.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b", Partition: 1}
	page = roundTrip(t, c, dtp).(*kmsg.DescribeTopicPartitionsResponse)
	if len(page.Topics) != 1 || len(page.Topics[0].Partitions) != 1 || page.NextCursor != nil {
		t.Fatalf("second page %+v", page)
	}

	q := adminSweepRequest(int16(kmsg.DescribeQuorum), 0, "").(*kmsg.DescribeQuorumRequest)
	q.Topics[0].Partitions = append(q.Topics[0].Partitions, kmsg.DescribeQuorumRequestTopicPartition{Partition: 1})
	qr := roundTrip(t, c, q).(*kmsg.DescribeQuorumResponse)
	if p := qr.Topics[0].Partitions; p[0].LeaderID != 1 || len(p[0].CurrentVoters) != 1 ||
		p[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("quorum %+v", qr)
	}

	ar := adminSweepRequest(int16(kmsg.AlterPartitionAssignments), 0, "a").(*kmsg.AlterPartitionAssignmentsRequest)
	ar.Topics[0].Partitions[0].Replicas = []int32{}
	ar.Topics[0].Partitions = append(ar.Topics[0].Partitions, kmsg.AlterPartitionAssignmentsRequestTopicPartition{Partition: 1})
	arr := roundTrip(t, c, ar).(*kmsg.AlterPartitionAssignmentsResponse)
	if p := arr.Topics[0].Partitions; p[0].ErrorCode != kerr.InvalidReplicaAssignment.Code ||
		p[1].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("reassign %+v", arr)
	}

	// v1 without a replication factor change allowed: 2 replicas for RF 1.
	ar = adminSweepRequest(int16(kmsg.AlterPartitionAssignments), 0, "a").(*kmsg.AlterPartitionAssignmentsRequest)
	ar.Version, ar.AllowReplicationFactorChange = 1, false
	ar.Topics[0].Partitions[0].Replicas = []int32{1, 2}
	arr = roundTrip(t, c, ar).(*kmsg.AlterPartitionAssignmentsResponse)
	if p := arr.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidReplicationFactor.Code || arr.AllowReplicationFactorChange {
		t.Fatalf("v1 RF change: %+v", arr)
	}
	ar.Topics[0].Partitions[0].Replicas = []int32{1}
	if p := roundTrip(t, c, ar).(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("v1 same RF: %+v", p)
	}

	el := adminSweepRequest(int16(kmsg.ElectLeaders), 0, "a").(*kmsg.ElectLeadersRequest)
	el.SetVersion(1)
	el.ElectionType = 7
	if er := roundTrip(t, c, el).(*kmsg.ElectLeadersResponse); er.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("election type 7: %+v", er)
	}
}

// TestClusterAdminWithoutBroker: a Broker without ClusterAdmin answers the
// APIs that need one with INVALID_REQUEST, not a dropped connection.
func TestClusterAdminWithoutBroker(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "a", 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(struct{ Broker }{b}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	c := dial(t, ln.Addr().String())
	for _, key := range []int16{int16(kmsg.DescribeLogDirs), int16(kmsg.ElectLeaders), int16(kmsg.AlterPartitionAssignments), int16(kmsg.DescribeQuorum)} {
		resp := roundTrip(t, c, adminSweepRequest(key, 0, "a"))
		codes := errorCodes(resp)
		if len(codes) == 0 || codes[0] != kerr.InvalidRequest.Code {
			t.Errorf("%s: codes %v", kmsg.NameForKey(key), codes)
		}
	}
}
