package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// DescribeConfigs config sources (Kafka's numbers).
const (
	configSourceTopic   = 1 // DYNAMIC_TOPIC_CONFIG
	configSourceDefault = 5 // DEFAULT_CONFIG
)

// Issue 18: kafka-go's Client (segmentio/kafka-go, the admin calls it
// exposes) against a real runnel node. The steps share one node and run in
// order: each builds on the topics the previous ones left.
func TestKafkaGoClientAdmin(t *testing.T) {
	n := kafkaNode(t)
	cl := &kafka.Client{Addr: kafka.TCP(n.KafkaAddr), Timeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "kgo-admin"
	topicRes := kafka.ResourceTypeTopic
	describeTopic := func(name string) map[string]kafka.DescribeConfigResponseConfigEntry {
		t.Helper()
		r, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
			{ResourceType: topicRes, ResourceName: name}}})
		if err != nil || len(r.Resources) != 1 || r.Resources[0].Error != nil {
			t.Fatalf("describe configs of %s: %v %+v", name, err, r)
		}
		out := map[string]kafka.DescribeConfigResponseConfigEntry{}
		for _, e := range r.Resources[0].ConfigEntries {
			out[e.ConfigName] = e
		}
		return out
	}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ApiVersions", func(t *testing.T) {
			r, err := cl.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
			if err != nil || r.Error != nil || len(r.ApiKeys) < 40 {
				t.Fatalf("%v %+v", err, r)
			}
		}},
		{"CreateTopics", func(t *testing.T) {
			r, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
				{Topic: topic, NumPartitions: 2, ReplicationFactor: 1,
					ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}}},
				{Topic: "kgo-assigned", NumPartitions: -1, ReplicationFactor: -1,
					ReplicaAssignments: []kafka.ReplicaAssignment{{Partition: 0, Replicas: []int{1}}, {Partition: 1, Replicas: []int{1}}}},
				{Topic: "kgo-doomed", NumPartitions: 1, ReplicationFactor: 1},
			}})
			if err != nil {
				t.Fatal(err)
			}
			for name, e := range r.Errors {
				if e != nil {
					t.Fatalf("create %s: %v", name, e)
				}
			}
			r, err = cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}})
			if err != nil || !errors.Is(r.Errors[topic], kafka.TopicAlreadyExists) {
				t.Fatalf("create again: %v %+v", err, r)
			}
		}},
		{"DeleteTopics", func(t *testing.T) {
			r, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{"kgo-doomed", "kgo-never"}})
			if err != nil || r.Errors["kgo-doomed"] != nil || !errors.Is(r.Errors["kgo-never"], kafka.UnknownTopicOrPartition) {
				t.Fatalf("%v %+v", err, r)
			}
		}},
		{"CreatePartitions", func(t *testing.T) {
			r, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 3}}})
			if err != nil || r.Errors[topic] != nil {
				t.Fatalf("%v %+v", err, r)
			}
			// kafka-go's Client answers Metadata from its transport's cache
			// (refreshed every 6 s), so the broker is asked over HTTP.
			if ps, ok := describe(n, topic); !ok || len(ps) != 3 {
				t.Fatalf("after growing: %+v", ps)
			}
			r, err = cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 2}}})
			if err != nil || !errors.Is(r.Errors[topic], kafka.InvalidPartitionNumber) {
				t.Fatalf("shrink: %v %+v", err, r)
			}
		}},
		{"DescribeConfigs", func(t *testing.T) {
			cfg := describeTopic(topic)
			if e := cfg["retention.ms"]; e.ConfigValue != "3600000" || e.ConfigSource != configSourceTopic {
				t.Fatalf("retention.ms %+v", e)
			}
			if _, ok := cfg["cleanup.policy"]; !ok {
				t.Fatalf("cleanup.policy not listed: %+v", cfg)
			}
			r, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
				{ResourceType: kafka.ResourceTypeBroker, ResourceName: "1"}}})
			if err != nil || r.Resources[0].Error != nil || len(r.Resources[0].ConfigEntries) == 0 {
				t.Fatalf("broker configs: %v %+v", err, r)
			}
		}},
		{"AlterConfigs", func(t *testing.T) {
			r, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{
				{ResourceType: topicRes, ResourceName: topic, Configs: []kafka.AlterConfigRequestConfig{{Name: "cleanup.policy", Value: "compact"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			for res, e := range r.Errors {
				if e != nil {
					t.Fatalf("%+v: %v", res, e)
				}
			}
			cfg := describeTopic(topic)
			// AlterConfigs replaces the whole set: retention.ms is back to its
			// default. (IsDefault is DescribeConfigs v0's; kafka-go asks for a
			// later version, whose answer is the source.)
			if cfg["cleanup.policy"].ConfigValue != "compact" || cfg["retention.ms"].ConfigSource != configSourceDefault {
				t.Fatalf("after AlterConfigs: %+v / %+v", cfg["cleanup.policy"], cfg["retention.ms"])
			}
		}},
		{"IncrementalAlterConfigs", func(t *testing.T) {
			r, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{
				{ResourceType: topicRes, ResourceName: topic, Configs: []kafka.IncrementalAlterConfigsRequestConfig{
					{Name: "retention.ms", Value: "7200000", ConfigOperation: kafka.ConfigOperationSet},
					{Name: "cleanup.policy", ConfigOperation: kafka.ConfigOperationDelete}}}}})
			if err != nil || len(r.Resources) != 1 || r.Resources[0].Error != nil {
				t.Fatalf("%v %+v", err, r)
			}
			cfg := describeTopic(topic)
			if cfg["retention.ms"].ConfigValue != "7200000" || cfg["cleanup.policy"].ConfigValue != "delete" {
				t.Fatalf("after IncrementalAlterConfigs: %+v / %+v", cfg["retention.ms"], cfg["cleanup.policy"])
			}
		}},
		{"ListOffsets", func(t *testing.T) {
			// acks=all: the default (none) returns before the node appended.
			w := &kafka.Writer{Addr: kafka.TCP(n.KafkaAddr), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
			defer w.Close()
			if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("a"), Value: []byte("1")}, kafka.Message{Key: []byte("a"), Value: []byte("2")}); err != nil {
				t.Fatal(err)
			}
			r, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
				topic: {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0), kafka.FirstOffsetOf(1), kafka.LastOffsetOf(1), kafka.FirstOffsetOf(2), kafka.LastOffsetOf(2)}}})
			if err != nil {
				t.Fatal(err)
			}
			total := int64(0)
			for _, p := range r.Topics[topic] {
				if p.Error != nil || p.FirstOffset != 0 {
					t.Fatalf("partition %+v", p)
				}
				total += p.LastOffset
			}
			if len(r.Topics[topic]) != 3 || total != 2 {
				t.Fatalf("offsets %+v", r.Topics[topic])
			}
		}},
		{"ListGroups/DescribeGroups", func(t *testing.T) {
			// The member is kafka-go's own: it decodes consumer protocol
			// metadata up to v1 only, and franz-go's members send v3 (the
			// same error against Kafka).
			cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: "kgo-group", Brokers: []string{n.KafkaAddr},
				Topics: []string{topic}, HeartbeatInterval: time.Second, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cg.Close()
			if _, err := cg.Next(ctx); err != nil {
				t.Fatalf("join: %v", err)
			}
			r, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{"kgo-group"}})
			if err != nil || len(r.Groups) != 1 {
				t.Fatalf("describe groups: %v %+v", err, r)
			}
			g := r.Groups[0]
			if g.Error != nil || g.GroupState != "Stable" || len(g.Members) != 1 {
				t.Fatalf("group %+v", g)
			}
			if m := g.Members[0]; len(m.MemberMetadata.Topics) != 1 || m.MemberMetadata.Topics[0] != topic ||
				len(m.MemberAssignments.Topics) != 1 || len(m.MemberAssignments.Topics[0].Partitions) != 3 {
				t.Fatalf("member %+v", m)
			}
			l, err := cl.ListGroups(ctx, &kafka.ListGroupsRequest{})
			if err != nil || l.Error != nil || len(l.Groups) != 1 || l.Groups[0].GroupID != "kgo-group" {
				t.Fatalf("list groups: %v %+v", err, l)
			}
		}},
		{"ElectLeaders", func(t *testing.T) {
			r, err := cl.ElectLeaders(ctx, &kafka.ElectLeadersRequest{Topic: topic, Partitions: []int{0, 1}})
			if err != nil || r.Error != nil || len(r.PartitionResults) != 2 {
				t.Fatalf("%v %+v", err, r)
			}
			for _, p := range r.PartitionResults {
				if !errors.Is(p.Error, kafka.ElectionNotNeeded) {
					t.Fatalf("partition %+v: the only replica leads already", p)
				}
			}
		}},
		{"AlterPartitionReassignments/ListPartitionReassignments", func(t *testing.T) {
			r, err := cl.AlterPartitionReassignments(ctx, &kafka.AlterPartitionReassignmentsRequest{Topic: topic,
				Assignments: []kafka.AlterPartitionReassignmentsRequestAssignment{{PartitionID: 0, BrokerIDs: []int{1}}}})
			if err != nil || r.Error != nil || len(r.PartitionResults) != 1 || r.PartitionResults[0].Error != nil {
				t.Fatalf("%v %+v", err, r)
			}
			l, err := cl.ListPartitionReassignments(ctx, &kafka.ListPartitionReassignmentsRequest{
				Topics: map[string]kafka.ListPartitionReassignmentsRequestTopic{topic: {PartitionIndexes: []int{0}}}})
			if err != nil || l.Error != nil || len(l.Topics[topic].Partitions) != 0 {
				t.Fatalf("list: %v %+v", err, l)
			}
		}},
		{"DescribeClientQuotas", func(t *testing.T) {
			r, err := cl.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{})
			if err != nil || r.Error != nil {
				t.Fatalf("%v %+v", err, r)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}
