package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// OffsetForLeaderEpoch, key 23: versions 2-4 (flexible from 4). Consumers
// use it to detect log truncation after a leader change.
const (
	offsetForLeaderEpochKey = 23
	offsetForLeaderEpochMin = 2
	offsetForLeaderEpochMax = 4
)

func (s *Server) offsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	// v3+ carry the replica id (-1 consumers, -2 debugging tools); a
	// follower's request is only taken from that follower (see fetch).
	if req.Version >= 3 {
		if err := s.checkReplica(ctx, req.ReplicaID, "OffsetForLeaderEpoch"); err != nil {
			return offsetForLeaderEpochError(req, kapi.KafkaErr(err))
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			epoch, end, err := s.broker.EndOffsetForEpoch(ctx, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch)
			if err != nil {
				p.ErrorCode, p.LeaderEpoch, p.EndOffset = kapi.KafkaErr(err), -1, -1
			} else {
				p.LeaderEpoch, p.EndOffset = epoch, end
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func offsetForLeaderEpochError(req *kmsg.OffsetForLeaderEpochRequest, code int16) *kmsg.OffsetForLeaderEpochResponse {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset = rp.Partition, code, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
