package server_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 18: ListOffsets at its newest version answers Kafka's special
// timestamps as a broker without tiered storage does: -2 and -4 (earliest
// local) the log start offset, moved by DeleteRecords; -1 the high
// watermark; -3 the record with the largest timestamp; -5 (latest tiered)
// and -6 (earliest pending upload, v11) no offset (-1, -1, leader epoch
// -1) without an error; a time the first
// record at or after it; an unknown
// partition is UNKNOWN_TOPIC_OR_PARTITION whatever the timestamp.
func TestKafkaListOffsetsSpecialTimestamps(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	mustCreateKafkaTopic(t, adm, ctx, "lo", 1, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("lo"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, ts := range []int64{1000, 5000, 3000, 2000} {
		r := &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(ts)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "lo", Partition: 0, At: 1})
	if rs, err := adm.DeleteRecords(ctx, to); err != nil || rs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, rs.Error())
	}
	raw := rawClient(t, n.KafkaAddr)
	list := func(partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = partition, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kr, err := raw.SeedBrokers()[0].Request(ctx, req) // not sharded: kgo would refuse partition 7 itself
		if err != nil {
			t.Fatal(err)
		}
		resp := kr.(*kmsg.ListOffsetsResponse)
		if resp.Version < 11 {
			t.Fatalf("ListOffsets answered at v%d, want 11 or later", resp.Version)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		ts, offset, timestamp int64
		epoch                 int32
	}{
		{-2, 1, -1, 0},
		{-4, 1, -1, 0},
		{-1, 4, -1, 0},
		{-3, 1, 5000, 0},
		{-5, -1, -1, -1},
		{-6, -1, -1, -1},
		{4000, 1, 5000, 0}, // the first record at or after the time
		{6000, -1, -1, -1},
	} {
		p := list(0, tc.ts)
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp || p.LeaderEpoch != tc.epoch {
			t.Errorf("timestamp %d: offset %d, timestamp %d, epoch %d, %v; want %d, %d, %d", tc.ts,
				p.Offset, p.Timestamp, p.LeaderEpoch, kerr.ErrorForCode(p.ErrorCode), tc.offset, tc.timestamp, tc.epoch)
		}
	}
	for _, ts := range []int64{-4, -5, -6} {
		if p := list(7, ts); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("unknown partition, timestamp %d: %v", ts, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}
