package server_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 18: topic ids (KIP-516). A topic keeps the id it was created with
// across a restart; Metadata v12 finds it by id; Fetch (the newest
// version, which names topics by id only) reads it; once the topic is
// deleted and created again the old id is UNKNOWN_TOPIC_ID for Fetch,
// Metadata and DeleteTopics, and the new id works.
func TestKafkaTopicIDs(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "ids", 2, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ids", Partition: 0, Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, n.KafkaAddr)
	idOf := func(name string) [16]byte {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw)
		if err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID == ([16]byte{}) {
			t.Fatalf("metadata %s: %v %+v", name, err, resp)
		}
		return resp.Topics[0].TopicID
	}
	fetchByID := func(id [16]byte) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 13 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != id {
			t.Fatalf("fetch v%d by id %x: %+v", resp.Version, id, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	id := idOf("ids")
	if p := fetchByID(id); p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch by id: %+v", p)
	}
	byID := kmsg.NewPtrMetadataRequest()
	byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}}
	if resp, err := byID.RequestWith(ctx, raw); err != nil || resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "ids" {
		t.Fatalf("metadata by id: %v %+v", err, resp)
	}

	n.Stop()
	n.Start()
	if got := idOf("ids"); got != id {
		t.Fatalf("id %x after restart, %x before", got, id)
	}
	if p := fetchByID(id); p.ErrorCode != 0 || p.HighWatermark != 1 {
		t.Fatalf("fetch by id after restart: %+v", p)
	}

	if rs, err := adm.DeleteTopics(ctx, "ids"); err != nil || rs["ids"].Err != nil {
		t.Fatalf("delete: %v %+v", err, rs)
	}
	mustCreateKafkaTopic(t, adm, ctx, "ids", 1, 1, nil)
	fresh := idOf("ids")
	if fresh == id {
		t.Fatal("the topic created again kept the old id")
	}
	if p := fetchByID(id); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by the stale id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if resp, err := byID.RequestWith(ctx, raw); err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("metadata by the stale id: %v %+v", err, resp)
	}
	if p := fetchByID(fresh); p.ErrorCode != 0 || p.HighWatermark != 0 {
		t.Fatalf("fetch by the new id: %+v", p)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 30000
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}}
	if resp, err := del.RequestWith(ctx, raw); err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by the stale id: %v %+v", err, resp)
	}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: fresh}}
	if resp, err := del.RequestWith(ctx, raw); err != nil || resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "ids" {
		t.Fatalf("delete by id: %v %+v", err, resp)
	}
}
