package kafkaproto

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serve calls the handler of req's key as the connection would once the
// request is decoded and authorized.
func serve[Resp kmsg.Response](s *Server, ctx context.Context, req kmsg.Request) Resp {
	return s.handlers[req.Key()].Serve(s, ctx, req).(Resp)
}

func newHandlerServer(t *testing.T, opts Options) (*memBroker, *Server) {
	t.Helper()
	b := newMemBroker()
	s := NewServer(b, opts)
	t.Cleanup(func() { s.Close() })
	mustCreate(t, b, "t", 2)
	return b, s
}

func produceReq(topic string, partition int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = produceMax, acks, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceErrors(t *testing.T) {
	_, s := newHandlerServer(t, Options{})
	good := testBatch(2, -1, -1)
	corrupt := testBatch(2, -1, -1)
	corrupt[len(corrupt)-1] ^= 0xff
	txn := produceReq("t", 0, -1, good)
	txn.TransactionID = kmsg.StringPtr("tx")
	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{
		{"unknown topic", produceReq("nope", 0, -1, good), kerr.UnknownTopicOrPartition},
		{"unknown partition", produceReq("t", 9, -1, good), kerr.UnknownTopicOrPartition},
		{"bad acks", produceReq("t", 0, 2, good), kerr.InvalidRequiredAcks},
		{"corrupt batch", produceReq("t", 0, 1, corrupt), kerr.CorruptMessage},
		{"no records", produceReq("t", 0, 1, nil), kerr.CorruptMessage},
		{"transactional", txn, kerr.TransactionalIDAuthorizationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := s.produce(context.Background(), tc.req).Topics[0].Partitions[0]
			if p.ErrorCode != tc.want.Code || p.BaseOffset != -1 || p.ErrorMessage == nil {
				t.Fatalf("got code %d offset %d message %v, want %s", p.ErrorCode, p.BaseOffset, p.ErrorMessage, tc.want.Message)
			}
		})
	}
}

// TestProduceAcksZero: an acks=0 produce gets no response; one that fails
// closes the connection.
func TestProduceAcksZero(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	mustCreate(t, b, "t", 1)
	c := dial(t, addr)
	for range 3 {
		if _, err := c.Write(testFormatter.AppendRequest(nil, produceReq("t", 0, 0, testBatch(2, -1, -1)), 1)); err != nil {
			t.Fatal(err)
		}
	}
	// The next response on the connection is the ApiVersions one.
	roundTrip(t, c, apiVersionsRequest(3))
	if end := b.topics["t"].parts[0].end; end != 6 {
		t.Fatalf("log end %d after three acks=0 produces, want 6", end)
	}
	if _, err := c.Write(testFormatter.AppendRequest(nil, produceReq("nope", 0, 0, testBatch(2, -1, -1)), 2)); err != nil {
		t.Fatal(err)
	}
	assertClosed(t, c)
}

// TestProduceIdempotentDuplicate: a batch replayed with the same producer
// id and sequence gets its original offset back and is stored once.
func TestProduceIdempotentDuplicate(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	first := s.produce(ctx, produceReq("t", 1, -1, testBatch(3, 77, 0))).Topics[0].Partitions[0]
	second := s.produce(ctx, produceReq("t", 1, -1, testBatch(3, 77, 3))).Topics[0].Partitions[0]
	replay := s.produce(ctx, produceReq("t", 1, -1, testBatch(3, 77, 3))).Topics[0].Partitions[0]
	if first.ErrorCode != 0 || second.BaseOffset != 3 || replay.ErrorCode != 0 || replay.BaseOffset != second.BaseOffset {
		t.Fatalf("first %+v second %+v replay %+v", first, second, replay)
	}
	if end := b.topics["t"].parts[1].end; end != 6 {
		t.Fatalf("log end %d after a duplicate, want 6", end)
	}
}

func metadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestMetadata(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	mustCreate(t, b, "a", 1)
	ctx := context.Background()
	all := metadataReq(12)
	all.Topics = nil
	if got := s.metadata(ctx, all); len(got.Topics) != 2 || *got.ClusterID != "test-cluster" || got.ControllerID != 1 {
		t.Fatalf("all topics: %+v", got)
	}
	if got := s.metadata(ctx, metadataReq(0)); len(got.Topics) != 2 {
		t.Fatalf("v0 empty list means all topics, got %d", len(got.Topics))
	}
	none := metadataReq(1)
	none.Topics = []kmsg.MetadataRequestTopic{}
	if got := s.metadata(ctx, none); len(got.Topics) != 0 {
		t.Fatalf("v1 empty list means no topics, got %d", len(got.Topics))
	}
	got := s.metadata(ctx, metadataReq(12, "t", "missing", "bad/name"))
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code}
	for i, code := range want {
		if got.Topics[i].ErrorCode != code {
			t.Errorf("topic %d: code %d, want %d", i, got.Topics[i].ErrorCode, code)
		}
	}
	if p := got.Topics[0].Partitions; len(p) != 2 || p[1].Leader != 1 || len(p[1].ISR) != 1 {
		t.Errorf("partitions %+v", p)
	}
	byID := metadataReq(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = b.topics["a"].id
	unknown := kmsg.NewMetadataRequestTopic()
	unknown.TopicID = [16]byte{9}
	byID.Topics = append(byID.Topics, rt, unknown)
	got = s.metadata(ctx, byID)
	if *got.Topics[0].Topic != "a" || got.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("by id: %+v", got.Topics)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	for _, tc := range []struct {
		enabled, allow bool
		want           int16
	}{
		{false, true, kerr.UnknownTopicOrPartition.Code},
		{true, false, kerr.UnknownTopicOrPartition.Code},
		{true, true, kerr.LeaderNotAvailable.Code}, // created: Kafka answers this until the next request
	} {
		_, s := newHandlerServer(t, Options{AutoCreateTopics: tc.enabled})
		req := metadataReq(12, "fresh")
		req.AllowAutoTopicCreation = tc.allow
		if got := s.metadata(context.Background(), req).Topics[0].ErrorCode; got != tc.want {
			t.Errorf("enabled %v allow %v: code %d, want %d", tc.enabled, tc.allow, got, tc.want)
		}
	}
}

func createReq(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly, req.Topics = handlerTable()[int16(kmsg.CreateTopics)].Max, validateOnly, topics
	return req
}

func newTopic(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func TestCreateTopics(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	assigned := func(n int32, as ...[]int32) kmsg.CreateTopicsRequestTopic {
		t := newTopic("assigned", n, -1)
		for p, r := range as {
			t.ReplicaAssignment = append(t.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: r})
		}
		return t
	}
	gap := assigned(-1, []int32{1}, []int32{1})
	gap.ReplicaAssignment[1].Partition = 2
	for _, tc := range []struct {
		name  string
		topic kmsg.CreateTopicsRequestTopic
		want  *kerr.Error
	}{
		{"exists", newTopic("t", 1, 1), kerr.TopicAlreadyExists},
		{"bad name", newTopic("a b", 1, 1), kerr.InvalidTopicException},
		{"bad partitions", newTopic("p0", 0, 1), kerr.InvalidPartitions},
		{"bad replication", newTopic("r3", 1, 3), kerr.InvalidReplicationFactor},
		{"bad config", newTopic("cfg", 1, 1, "no.such.config", "1"), kerr.InvalidConfig},
		{"assignment and partitions", assigned(1, []int32{1}), kerr.InvalidRequest},
		{"assignment gap", gap, kerr.InvalidReplicaAssignment},
		{"assignment twice", assigned(-1, []int32{1, 1}), kerr.InvalidReplicaAssignment},
		{"assignment rf", assigned(-1, []int32{1}, []int32{1, 2}), kerr.InvalidReplicaAssignment},
		{"assignment empty", assigned(-1, []int32{}), kerr.InvalidReplicaAssignment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serve[*kmsg.CreateTopicsResponse](s, ctx, createReq(false, tc.topic)).Topics[0]
			if got.ErrorCode != tc.want.Code || got.ErrorMessage == nil {
				t.Fatalf("code %d message %v, want %s", got.ErrorCode, got.ErrorMessage, tc.want.Message)
			}
		})
	}
	dup := serve[*kmsg.CreateTopicsResponse](s, ctx, createReq(false, newTopic("d", 1, 1), newTopic("d", 1, 1)))
	if dup.Topics[0].ErrorCode != kerr.InvalidRequest.Code || dup.Topics[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate names: %+v", dup.Topics)
	}
	if got := serve[*kmsg.CreateTopicsResponse](s, ctx, createReq(true, newTopic("v", 4, 1))).Topics[0]; got.ErrorCode != 0 || got.NumPartitions != 4 {
		t.Fatalf("validate only: %+v", got)
	}
	if _, ok := b.topics["v"]; ok {
		t.Fatal("validate only created the topic")
	}
	got := serve[*kmsg.CreateTopicsResponse](s, ctx, createReq(false, newTopic("n", 3, -1, "retention.ms", "5"))).Topics[0]
	if got.ErrorCode != 0 || got.NumPartitions != 3 || got.ReplicationFactor != 1 || got.TopicID != b.topics["n"].id {
		t.Fatalf("created: %+v", got)
	}
	if len(got.Configs) != 2 || *got.Configs[1].Value != "5" || got.Configs[1].Source != int8(SourceTopic) {
		t.Fatalf("created configs: %+v", got.Configs)
	}
}

func TestDeleteTopicsAndPartitions(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	mustCreate(t, b, "byid", 1)
	id := b.topics["byid"].id
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}, {TopicID: id}, {Topic: kmsg.StringPtr("gone")}, {TopicID: [16]byte{7}}}
	got := serve[*kmsg.DeleteTopicsResponse](s, ctx, req).Topics
	want := []int16{0, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code}
	for i, code := range want {
		if got[i].ErrorCode != code {
			t.Errorf("topic %d: code %d, want %d", i, got[i].ErrorCode, code)
		}
	}
	if *got[1].Topic != "byid" || len(b.topics) != 0 {
		t.Errorf("after delete: %+v, topics left %d", got, len(b.topics))
	}

	mustCreate(t, b, "grow", 2)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = handlerTable()[int16(kmsg.CreatePartitions)].Max
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "grow", Count: 1}, {Topic: "grow", Count: 5}, {Topic: "none", Count: 5}}
	codes := serve[*kmsg.CreatePartitionsResponse](s, ctx, cp).Topics
	if codes[0].ErrorCode != kerr.InvalidPartitions.Code || codes[1].ErrorCode != 0 ||
		codes[2].ErrorCode != kerr.UnknownTopicOrPartition.Code || len(b.topics["grow"].parts) != 5 {
		t.Fatalf("create partitions: %+v", codes)
	}
}

func TestConfigs(t *testing.T) {
	_, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Version = 1
	for _, tc := range []struct {
		name string
		typ  kmsg.ConfigResourceType
		res  string
		cfg  string
		want int16
	}{
		{"set", kmsg.ConfigResourceTypeTopic, "t", "retention.ms", 0},
		{"unknown config", kmsg.ConfigResourceTypeTopic, "t", "bogus", kerr.InvalidConfig.Code},
		{"unknown topic", kmsg.ConfigResourceTypeTopic, "zz", "retention.ms", kerr.UnknownTopicOrPartition.Code},
		{"group resource", kmsg.ConfigResourceTypeGroupConfig, "g", "retention.ms", kerr.InvalidRequest.Code},
	} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = tc.typ, tc.res
		r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: tc.cfg, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("42")}}
		alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
		if got := serve[*kmsg.IncrementalAlterConfigsResponse](s, ctx, alter).Resources[0].ErrorCode; got != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.want)
		}
	}
	desc := kmsg.NewPtrDescribeConfigsRequest()
	desc.Version = 4
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	filtered := r
	filtered.ConfigNames = []string{"cleanup.policy"}
	missing := r
	missing.ResourceName = "zz"
	desc.Resources = []kmsg.DescribeConfigsRequestResource{r, filtered, missing}
	got := serve[*kmsg.DescribeConfigsResponse](s, ctx, desc).Resources
	if len(got[0].Configs) != 2 || *got[0].Configs[1].Value != "42" || got[0].Configs[1].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		got[0].Configs[0].Source != kmsg.ConfigSourceDefaultConfig || !got[0].Configs[0].IsDefault {
		t.Errorf("describe: %+v", got[0].Configs)
	}
	if len(got[1].Configs) != 1 || got[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("filtered %+v, missing %+v", got[1], got[2])
	}
}

func TestDeleteRecordsAndListOffsets(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	if _, err := b.Produce(ctx, "t", 0, testBatch(10, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	del := kmsg.NewPtrDeleteRecordsRequest()
	del.Version = 2
	del.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 4}, {Partition: 1, Offset: 99}}}}
	got := serve[*kmsg.DeleteRecordsResponse](s, ctx, del).Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[0].LowWatermark != 4 || got[1].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("delete records: %+v", got)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = listOffsetsMax
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{
		{Partition: 0, Timestamp: -2}, {Partition: 0, Timestamp: -1}, {Partition: 0, Timestamp: 0}, {Partition: 0, Timestamp: 1 << 60}, {Partition: 7, Timestamp: -1}}}}
	offs := s.listOffsets(ctx, lo).Topics[0].Partitions
	if offs[0].Offset != 4 || offs[1].Offset != 10 || offs[2].Offset != 0 || offs[3].Offset != -1 || offs[4].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("list offsets: %+v", offs)
	}
}

func TestInitProducerIDAndDescribeCluster(t *testing.T) {
	_, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	a, bb := s.initProducerID(ctx, req), s.initProducerID(ctx, req)
	if a.ErrorCode != 0 || a.ProducerID == bb.ProducerID {
		t.Fatalf("producer ids %d and %d", a.ProducerID, bb.ProducerID)
	}
	req.TransactionalID = kmsg.StringPtr("tx")
	if got := s.initProducerID(ctx, req); got.ErrorCode == 0 || got.ProducerID != -1 {
		t.Fatalf("transactional: %+v", got)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.EndpointType = 1, 2
	if got := serve[*kmsg.DescribeClusterResponse](s, ctx, dc); got.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controllers endpoint: %+v", got)
	}
}

// movedBroker says partition 1 of "t" is led by broker 2 (epoch 7).
type movedBroker struct{ *memBroker }

func (m movedBroker) Cluster() (*Cluster, <-chan struct{}) {
	cl, ch := m.memBroker.Cluster()
	cp := *cl
	cp.Brokers = append(slices.Clone(cl.Brokers), BrokerInfo{ID: 2, Host: "other.example", Port: 9999, Rack: "r2"})
	cp.Topics = slices.Clone(cl.Topics)
	for i := range cp.Topics {
		if cp.Topics[i].Name == "t" {
			cp.Topics[i].Partitions = slices.Clone(cp.Topics[i].Partitions)
			cp.Topics[i].Partitions[1].Leader, cp.Topics[i].Partitions[1].LeaderEpoch = 2, 7
		}
	}
	return &cp, ch
}

func (m movedBroker) Produce(ctx context.Context, topic string, partition int32, batches []byte, acks int16) (ProduceResult, error) {
	if partition == 1 {
		return ProduceResult{}, fmt.Errorf("moved: %w", ErrNotLeader)
	}
	return m.memBroker.Produce(ctx, topic, partition, batches, acks)
}

// TestProduceLeaderHint: from v10 a NOT_LEADER_OR_FOLLOWER answer names the
// new leader and its endpoint; older versions carry only the code.
func TestProduceLeaderHint(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "t", 2)
	s := NewServer(movedBroker{b}, Options{})
	defer s.Close()
	for _, v := range []int16{9, 10, produceMax} {
		req := produceReq("t", 1, -1, testBatch(1, -1, -1))
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, kmsg.ProduceRequestTopicPartition{Partition: 0, Records: testBatch(1, -1, -1)})
		req.Version = v
		resp := s.produce(context.Background(), req)
		moved, stayed := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
		if moved.ErrorCode != kerr.NotLeaderForPartition.Code || stayed.ErrorCode != 0 || stayed.CurrentLeader.LeaderID != -1 {
			t.Fatalf("v%d: moved %+v stayed %+v", v, moved, stayed)
		}
		hinted := moved.CurrentLeader.LeaderID == 2 && moved.CurrentLeader.LeaderEpoch == 7 &&
			len(resp.Brokers) == 1 && resp.Brokers[0].Host == "other.example" && resp.Brokers[0].Port == 9999
		if hinted != (v >= 10) {
			t.Fatalf("v%d: leader hint %+v brokers %+v", v, moved.CurrentLeader, resp.Brokers)
		}
	}
}

// TestMetadataV13: v13 adds a top-level error code (KIP-1102, Kafka's
// REBOOTSTRAP_REQUIRED); runnel never asks clients to rebootstrap, so a
// served request answers 0 there and the per-topic codes as before, and a
// request refused as a whole carries its code at the top too.
func TestMetadataV13(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	if _, err := b.Produce(ctx, "t", 0, testBatch(1, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	req := metadataReq(13, "t", "missing")
	got := s.metadata(ctx, req)
	if got.Version != 13 || got.ErrorCode != 0 || len(got.Topics) != 2 || got.Topics[0].ErrorCode != 0 ||
		got.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata v13: %+v", got)
	}
	var decoded kmsg.MetadataResponse
	decoded.Version = 13
	if err := decoded.ReadFrom(got.AppendTo(nil)); err != nil || decoded.ErrorCode != 0 || len(decoded.Topics) != 2 {
		t.Fatalf("v13 round trip: %v %+v", err, decoded)
	}
	if e := metadataError(req, kerr.ClusterAuthorizationFailed.Code); e.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("refused: %+v", e)
	}
}

// TestListOffsetsEarliestPendingUpload: -6 (v11, KIP-1023) finds no offset
// without tiered storage (-1, -1, epoch -1, no error), after the same
// partition checks as any lookup.
func TestListOffsetsEarliestPendingUpload(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	ctx := context.Background()
	if _, err := b.Produce(ctx, "t", 0, testBatch(3, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 11
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{
		{Partition: 0, Timestamp: -6, CurrentLeaderEpoch: -1}, {Partition: 7, Timestamp: -6, CurrentLeaderEpoch: -1}}}}
	got := s.listOffsets(ctx, lo).Topics[0].Partitions
	if p := got[0]; p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 || p.LeaderEpoch != -1 {
		t.Fatalf("-6: %+v", p)
	}
	if got[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("-6 on an unknown partition: %+v", got[1])
	}
}

// A partition whose leader is not among the brokers a Metadata answer
// lists (fenced, or not yet unfenced after a restart, while the controller
// has not moved its leadership yet) is LEADER_NOT_AVAILABLE with leader -1,
// as Kafka answers: Kafka names only leaders it lists, and a client given a
// leader it has no address for cannot reach it (franz-go reports such a
// broker as unknown). DescribeTopicPartitions answers the same.
func TestMetadataLeaderNotListed(t *testing.T) {
	b, s := newHandlerServer(t, Options{})
	b.mu.Lock()
	cl := *b.cluster
	cl.Topics = slices.Clone(cl.Topics)
	for i := range cl.Topics {
		if cl.Topics[i].Name == "t" {
			cl.Topics[i].Partitions = slices.Clone(cl.Topics[i].Partitions)
			cl.Topics[i].Partitions[1].Leader = 2 // broker 2 is not listed
		}
	}
	b.cluster = &cl
	b.mu.Unlock()
	ctx := context.Background()
	got := s.metadata(ctx, metadataReq(12, "t"))
	if len(got.Brokers) != 1 || got.Brokers[0].NodeID != 1 {
		t.Fatalf("brokers %+v", got.Brokers)
	}
	p := got.Topics[0].Partitions
	if p[0].ErrorCode != 0 || p[0].Leader != 1 {
		t.Errorf("partition 0: leader %d, %v", p[0].Leader, kerr.ErrorForCode(p[0].ErrorCode))
	}
	if p[1].ErrorCode != kerr.LeaderNotAvailable.Code || p[1].Leader != -1 {
		t.Errorf("partition 1 led by an unlisted broker: leader %d, %v; want -1, LEADER_NOT_AVAILABLE", p[1].Leader, kerr.ErrorForCode(p[1].ErrorCode))
	}
	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "t"
	dreq.Topics = append(dreq.Topics, rt)
	dp := s.describeTopicPartitions(ctx, dreq).Topics[0].Partitions
	if dp[0].ErrorCode != 0 || dp[1].ErrorCode != kerr.LeaderNotAvailable.Code || dp[1].LeaderID != -1 {
		t.Errorf("DescribeTopicPartitions: %+v", dp)
	}
}

// TestHandlerKeysListedOnce: the families' lists and this package's do not
// name a key twice (the table would keep one of them silently), and every
// entry's versions are ones kmsg can decode.
func TestHandlerKeysListedOnce(t *testing.T) {
	seen := map[int16]bool{}
	for _, h := range handlerList() {
		if seen[h.Key] {
			t.Errorf("%s (key %d) listed twice", kmsg.NameForKey(h.Key), h.Key)
		}
		seen[h.Key] = true
		if req := kmsg.RequestForKey(h.Key); req == nil || h.Min < 0 || h.Min > h.Max || h.Max > req.MaxVersion() {
			t.Errorf("%s: versions %d-%d", kmsg.NameForKey(h.Key), h.Min, h.Max)
		}
	}
	if len(seen) != len(handlerTable()) {
		t.Fatalf("table has %d keys, list %d", len(handlerTable()), len(seen))
	}
}
