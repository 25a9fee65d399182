package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets, key 2: versions 1-7 (flexible from 6). Timestamps -2
// (earliest), -1 (latest) and -3 (max timestamp, v7) or a time in ms.
const (
	listOffsetsKey = 2
	listOffsetsMin = 1
	listOffsetsMax = 7
)

func (s *Server) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			off, ts, epoch, err := s.broker.ListOffset(ctx, rt.Topic, rp.Partition, rp.Timestamp,
				rp.CurrentLeaderEpoch, req.IsolationLevel == 1)
			if err != nil {
				p.ErrorCode, p.Offset, p.Timestamp = kafkaErr(err), -1, -1
			} else {
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
