package admin

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DeleteRecords, key 21: versions 0-2 (flexible from 2). Offset -1 means
// the high watermark.
const (
	deleteRecordsKey = 21
	deleteRecordsMin = 0
	deleteRecordsMax = 2
)

func deleteRecords(env kapi.Env, ctx context.Context, req *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition = rp.Partition
			low, err := env.Broker().DeleteRecords(ctx, rt.Topic, rp.Partition, rp.Offset)
			if err != nil {
				p.ErrorCode, p.LowWatermark = kapi.KafkaErr(err), -1
			} else {
				p.LowWatermark = low
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func deleteRecordsError(req *kmsg.DeleteRecordsRequest, code int16) *kmsg.DeleteRecordsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.ErrorCode, p.LowWatermark = rp.Partition, code, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
