package kafkaproto

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBatch encodes a RecordBatch v2 of n records with keys, values and a
// header, for producer pid (-1: none) starting at sequence seq.
func testBatch(n int, pid int64, seq int32) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i := range n {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Key = []byte(fmt.Sprintf("k%d", i))
		r.Value = []byte(fmt.Sprintf("v%d", i))
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("x")}}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after the (1-byte, zero) length
		records = r.AppendTo(records)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, 0, seq
	if pid < 0 {
		b.ProducerEpoch, b.FirstSequence = -1, -1
	}
	b.NumRecords = int32(n)
	b.Records = records
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// sweepRequest returns a typical, valid request for key at version, using
// names unique to the version so requests that change state do not clash.
func sweepRequest(key, v int16) kmsg.Request {
	const topic = "sweep"
	perVersion := fmt.Sprintf("sweep-%d-%d", key, v)
	switch key {
	case apiVersionsKey:
		return apiVersionsRequest(v)
	case metadataKey:
		r := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		r.Topics = append(r.Topics, t)
		return r
	case produceKey:
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 5000
		t := kmsg.NewProduceRequestTopic()
		t.Topic = topic
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = 1, testBatch(3, -1, -1)
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case fetchKey:
		r := kmsg.NewPtrFetchRequest()
		r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = 0, 1, 1<<20, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic = topic
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = 0, 0, 1<<20
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case listOffsetsKey:
		r := kmsg.NewPtrListOffsetsRequest()
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = topic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = 0, -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.CreateTopics):
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = perVersion, 2, 1
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.DeleteTopics):
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TimeoutMillis = 5000
		name := fmt.Sprintf("sweep-%d-%d", int16(kmsg.CreateTopics), v+1)
		r.TopicNames = []string{name}
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = &name
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.CreatePartitions):
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = "grow", int32(3+v)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.DescribeConfigs):
		r := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		r.Resources = append(r.Resources, res)
		return r
	case int16(kmsg.IncrementalAlterConfigs):
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("1000")
		res.Configs = append(res.Configs, c)
		r.Resources = append(r.Resources, res)
		return r
	case int16(kmsg.DeleteRecords):
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewDeleteRecordsRequestTopic()
		t.Topic = topic
		p := kmsg.NewDeleteRecordsRequestTopicPartition()
		p.Partition, p.Offset = 2, 0
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case initProducerIDKey:
		r := kmsg.NewPtrInitProducerIDRequest()
		return r
	case offsetForLeaderEpochKey:
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = topic
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch = 0, -1, 0
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	case int16(kmsg.DescribeCluster):
		return kmsg.NewPtrDescribeClusterRequest()
	}
	return adminSweepRequest(key, v, topic)
}

// sweepOrder runs creations before deletions.
var sweepOrder = []int16{apiVersionsKey, metadataKey, produceKey, fetchKey, listOffsetsKey, int16(kmsg.CreateTopics),
	int16(kmsg.DeleteTopics), int16(kmsg.CreatePartitions), int16(kmsg.DescribeConfigs), int16(kmsg.IncrementalAlterConfigs), int16(kmsg.DeleteRecords),
	initProducerIDKey, offsetForLeaderEpochKey, int16(kmsg.DescribeCluster),
	int16(kmsg.AlterConfigs), int16(kmsg.DescribeLogDirs), int16(kmsg.ElectLeaders), int16(kmsg.AlterPartitionAssignments),
	int16(kmsg.ListPartitionReassignments), int16(kmsg.DescribeQuorum), int16(kmsg.UpdateFeatures), describeTopicPartitionsKey, int16(kmsg.DescribeProducers),
	int16(kmsg.AlterReplicaLogDirs), int16(kmsg.ListConfigResources)}

// TestEveryVersion sends a valid request of every advertised key and
// version, flexible and not, over one connection, and checks that the
// response decodes at that version and carries no error.
func TestEveryVersion(t *testing.T) {
	b := newMemBroker()
	addr, s := startServer(t, b, Options{})
	mustCreate(t, b, "sweep", 3)
	mustCreate(t, b, "grow", 1)
	if len(sweepOrder)+len(groupSweepKeys)+len(saslSweepKeys)+len(peerSweepKeys)+len(txnSweepKeys)+len(quotaSweepKeys) != len(s.handlers) {
		t.Fatalf("sweep covers %d keys, groups_test.go %d, sasl_test.go %d, writetxnmarkers_test.go %d, txn_test.go %d and quotas_test.go %d, table has %d",
			len(sweepOrder), len(groupSweepKeys), len(saslSweepKeys), len(peerSweepKeys), len(txnSweepKeys), len(quotaSweepKeys), len(s.handlers))
	}
	// Seed data for fetch, list offsets and delete records.
	if _, err := b.Produce(context.Background(), "sweep", 0, testBatch(5, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	for _, key := range sweepOrder {
		h := s.handlers[key]
		for v := h.Min; v <= h.Max; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := sweepRequest(key, v)
				req.SetVersion(v)
				if f, ok := req.(*kmsg.FetchRequest); ok && v >= 13 {
					f.Topics[0].TopicID = memTopicID(b, f.Topics[0].Topic) // named by id only
				}
				resp := roundTrip(t, c, req)
				if codes := errorCodes(resp); len(codes) > 0 {
					t.Fatalf("error codes %v in %+v", codes, resp)
				}
				checkSweep(t, key, resp)
			})
		}
	}
}

// checkSweep checks the content of a few responses beyond "no error".
func checkSweep(t *testing.T, key int16, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		if len(r.ApiKeys) != len(SupportedVersions()) {
			t.Errorf("ApiVersions lists %d keys, want %d", len(r.ApiKeys), len(SupportedVersions()))
		}
	case *kmsg.MetadataResponse:
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 3 || len(r.Brokers) != 1 {
			t.Errorf("metadata %+v", r)
		}
	case *kmsg.FetchResponse:
		p := r.Topics[0].Partitions[0]
		if p.HighWatermark < 5 || len(p.RecordBatches) == 0 {
			t.Errorf("fetch partition %+v", p)
		}
	case *kmsg.ListOffsetsResponse:
		if off := r.Topics[0].Partitions[0].Offset; off < 5 {
			t.Errorf("latest offset %d", off)
		}
	case *kmsg.InitProducerIDResponse:
		if r.ProducerID < 0 {
			t.Errorf("producer id %d", r.ProducerID)
		}
	case *kmsg.DescribeClusterResponse:
		if r.ClusterID != "test-cluster" || len(r.Brokers) != 1 {
			t.Errorf("describe cluster %+v", r)
		}
	}
}

// errorCodes collects every non-zero ErrorCode field in v.
func errorCodes(v any) []int16 {
	var out []int16
	var walk func(reflect.Value)
	walk = func(rv reflect.Value) {
		switch rv.Kind() {
		case reflect.Pointer:
			if !rv.IsNil() {
				walk(rv.Elem())
			}
		case reflect.Slice:
			for i := range rv.Len() {
				walk(rv.Index(i))
			}
		case reflect.Struct:
			for i := range rv.NumField() {
				f := rv.Type().Field(i)
				if f.Name == "ErrorCode" && rv.Field(i).Int() != 0 {
					out = append(out, int16(rv.Field(i).Int()))
				} else if f.IsExported() {
					walk(rv.Field(i))
				}
			}
		}
	}
	walk(reflect.ValueOf(v))
	return out
}

// TestUnsupportedVersions: a version outside the advertised range that kmsg
// can still encode is answered with UNSUPPORTED_VERSION; ApiVersions in v0.
func TestUnsupportedVersions(t *testing.T) {
	b := newMemBroker()
	addr, s := startServer(t, b, Options{})
	mustCreate(t, b, "sweep", 3)
	c := dial(t, addr)
	for _, key := range sweepOrder {
		h := s.handlers[key]
		maxV := kmsg.RequestForKey(key).MaxVersion()
		for _, v := range []int16{h.Min - 1, h.Max + 1} {
			if v < 0 || v > maxV {
				continue
			}
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				req := sweepRequest(key, v)
				req.SetVersion(v)
				if key == apiVersionsKey {
					req.SetVersion(0) // the answer is decoded as v0
					c.Write(testFormatter.AppendRequest(nil, withVersion(req, v), 7))
					resp := decodeResponse(t, req, readResponseFrame(t, c), 7).(*kmsg.ApiVersionsResponse)
					if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
						t.Fatalf("ApiVersions v%d answered %+v", v, resp)
					}
					return
				}
				resp := roundTrip(t, c, req)
				codes := errorCodes(resp)
				if len(codes) == 0 {
					t.Fatalf("no error in %+v", resp)
				}
				for _, code := range codes {
					if code != kerr.UnsupportedVersion.Code {
						t.Fatalf("error code %d, want UNSUPPORTED_VERSION", code)
					}
				}
			})
		}
	}
}

// withVersion returns a request encoding at version v while the decoder
// side keeps its own copy's version.
func withVersion(req kmsg.Request, v int16) kmsg.Request {
	cp := reflect.New(reflect.TypeOf(req).Elem())
	cp.Elem().Set(reflect.ValueOf(req).Elem())
	out := cp.Interface().(kmsg.Request)
	out.SetVersion(v)
	return out
}

// TestSupportedVersionsAsSpecified pins the advertised keys and ranges to
// the ones the Kafka listener issue specifies; a change here is a change of
// what clients are told.
func TestSupportedVersionsAsSpecified(t *testing.T) {
	want := []APIVersion{
		{0, "Produce", 3, 12},
		{1, "Fetch", 4, 17},
		{2, "ListOffsets", 1, 11},
		{3, "Metadata", 0, 13},
		{8, "OffsetCommit", 2, 9},
		{9, "OffsetFetch", 1, 9},
		{10, "FindCoordinator", 0, 4},
		{11, "JoinGroup", 0, 9},
		{12, "Heartbeat", 0, 4},
		{13, "LeaveGroup", 0, 5},
		{14, "SyncGroup", 0, 5},
		{15, "DescribeGroups", 0, 5},
		{16, "ListGroups", 0, 4},
		{17, "SASLHandshake", 0, 1},
		{18, "ApiVersions", 0, 4},
		{19, "CreateTopics", 2, 7},
		{20, "DeleteTopics", 1, 6},
		{21, "DeleteRecords", 0, 2},
		{22, "InitProducerID", 0, 5},
		{23, "OffsetForLeaderEpoch", 2, 4},
		{24, "AddPartitionsToTxn", 0, 3},
		{25, "AddOffsetsToTxn", 0, 3},
		{26, "EndTxn", 0, 4},
		{27, "WriteTxnMarkers", 0, 1},
		{28, "TxnOffsetCommit", 0, 3},
		{29, "DescribeACLs", 0, 3},
		{30, "CreateACLs", 0, 3},
		{31, "DeleteACLs", 0, 3},
		{32, "DescribeConfigs", 1, 4},
		{33, "AlterConfigs", 0, 2},
		{34, "AlterReplicaLogDirs", 0, 2},
		{35, "DescribeLogDirs", 0, 5},
		{36, "SASLAuthenticate", 0, 2},
		{37, "CreatePartitions", 0, 3},
		{42, "DeleteGroups", 0, 2},
		{43, "ElectLeaders", 0, 2},
		{44, "IncrementalAlterConfigs", 0, 1},
		{45, "AlterPartitionAssignments", 0, 1},
		{46, "ListPartitionReassignments", 0, 0},
		{47, "OffsetDelete", 0, 0},
		{48, "DescribeClientQuotas", 0, 1},
		{49, "AlterClientQuotas", 0, 1},
		{55, "DescribeQuorum", 0, 2},
		{57, "UpdateFeatures", 0, 2},
		{60, "DescribeCluster", 0, 1},
		{61, "DescribeProducers", 0, 0},
		{65, "DescribeTransactions", 0, 0},
		{66, "ListTransactions", 0, 1},
		{74, "ListConfigResources", 0, 1},
		{75, "DescribeTopicPartitions", 0, 0},
	}
	if got := SupportedVersions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("SupportedVersions() =\n%v\nwant\n%v", got, want)
	}
}
