package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ListOffsets, key 2: versions 1-11 (flexible from 6; TimeoutMillis from 10,
// ignored: the answer never waits). Timestamps -2 (earliest), -1 (latest),
// -3 (max timestamp, v7), -4 (earliest local, v8), -5 (latest tiered, v9)
// and -6 (earliest pending upload, v11, KIP-1023) or a time in ms. runnel
// has no tiered storage, so it answers as Kafka does for a topic without
// remote storage: -4 is the log start offset (the whole log is local), -5
// and -6 find no offset (offset, timestamp and leader epoch -1, no error),
// after the same leader checks as any lookup.
const (
	listOffsetsKey = 2
	listOffsetsMin = 1
	listOffsetsMax = 11
)

// Kafka's special ListOffsets timestamps beyond -1/-2/-3 (KIP-405, KIP-1005).
const (
	earliestLocalTimestamp         = -4
	latestTieredTimestamp          = -5
	earliestPendingUploadTimestamp = -6
)

func (s *Server) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			ts := rp.Timestamp
			noOffset := ts == latestTieredTimestamp || (ts == earliestPendingUploadTimestamp && req.Version >= 11)
			if ts == earliestLocalTimestamp || noOffset {
				ts = -2 // the checks and answer of the earliest offset
			}
			off, ts, epoch, err := s.broker.ListOffset(ctx, rt.Topic, rp.Partition, ts,
				rp.CurrentLeaderEpoch, req.IsolationLevel == 1)
			switch {
			case err != nil:
				p.ErrorCode, p.Offset, p.Timestamp = kapi.KafkaErr(err), -1, -1
			case noOffset:
				p.Offset, p.Timestamp, p.LeaderEpoch = -1, -1, -1 // nothing is tiered or pending upload
			default:
				p.Offset, p.Timestamp, p.LeaderEpoch = off, ts, epoch
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func listOffsetsError(req *kmsg.ListOffsetsRequest, code int16) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.ErrorCode, p.Offset, p.Timestamp = rp.Partition, code, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
