package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// TestHostileInternalTopics: clients cannot produce to, delete, create or
// reconfigure __consumer_offsets or __transaction_state, over HTTP (403
// internal-topic) or Kafka (INVALID_TOPIC_EXCEPTION); the coordinator still
// stores commits, which survive a restart unchanged.
func TestHostileInternalTopics(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)

	// Before any group exists, nobody can create the offsets topic.
	c.problem("POST", "/v1/topics", "application/json",
		[]byte(`{"name":"__consumer_offsets","partitions":1,"configs":{"cleanup.policy":"delete","retention.ms":"1000"}}`), 403, "internal-topic")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"__transaction_state"}`), 403, "internal-topic")

	httpCreateTopic(t, n, "data", 1)
	produceIndexed(t, c, "data", 0, 100)
	commit := map[string]any{"offsets": []map[string]any{{"topic": "data", "partition": 0, "offset": 50}}}
	c.json(http.MethodPost, "/v1/groups/g1/offsets", commit, http.StatusOK, nil)

	// HTTP: produce, delete, reconfigure.
	c.problem("POST", "/v1/topics/__consumer_offsets/records", "application/json",
		[]byte(`{"records":[{"key":"forged","value":1,"partition":0}]}`), 403, "internal-topic")
	c.problem("DELETE", "/v1/topics/__consumer_offsets", "", nil, 403, "internal-topic")
	c.problem("PATCH", "/v1/topics/__consumer_offsets/configs", "application/json",
		[]byte(`{"configs":{"cleanup.policy":"delete","retention.ms":"1000"}}`), 403, "internal-topic")

	// Kafka: every write path.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: 0, Value: []byte("forged")})
	if err := res.FirstErr(); err != kerr.InvalidTopicException {
		t.Errorf("Kafka produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	name := "__consumer_offsets"
	kafkaCode := func(what string, code int16) {
		t.Helper()
		if err := kerr.ErrorForCode(code); err != kerr.InvalidTopicException {
			t.Errorf("Kafka %s: %v, want INVALID_TOPIC_EXCEPTION", what, err)
		}
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{name}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}}
	if resp, err := del.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		kafkaCode("DeleteTopics", resp.Topics[0].ErrorCode)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "__transaction_state", NumPartitions: 1, ReplicationFactor: 1}}
	if resp, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		kafkaCode("CreateTopics", resp.Topics[0].ErrorCode)
	}
	val := "delete"
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: name,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpSet, Value: &val}}}}
	if resp, err := inc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		kafkaCode("IncrementalAlterConfigs", resp.Resources[0].ErrorCode)
	}
	// (AlterConfigs, key 33, is not served by the listener at all.)
	parts := kmsg.NewPtrCreatePartitionsRequest()
	parts.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: name, Count: 10}}
	if resp, err := parts.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		kafkaCode("CreatePartitions", resp.Topics[0].ErrorCode)
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: name, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}}}}
	if resp, err := dr.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		kafkaCode("DeleteRecords", resp.Topics[0].Partitions[0].ErrorCode)
	}

	// The coordinator still appends, and what it stored is what comes back
	// after a restart.
	commit["offsets"].([]map[string]any)[0]["offset"] = 60
	c.json(http.MethodPost, "/v1/groups/g1/offsets", commit, http.StatusOK, nil)
	n.Stop()
	n.Start()
	var d groupDetail
	servertest.WaitFor(t, 30*time.Second, "group g1 loaded", func() bool {
		var ok bool
		d, ok = tryDescribe(t, c, "g1")
		return ok && len(d.Offsets) == 1
	})
	if d.Offsets[0].CommittedOffset != 60 {
		t.Fatalf("after a restart g1 is at %d, want 60", d.Offsets[0].CommittedOffset)
	}
	var topic topicDetail
	c.json("GET", "/v1/topics/__consumer_offsets", nil, 200, &topic)
	if topic.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("__consumer_offsets configs %v", topic.Configs)
	}
}
