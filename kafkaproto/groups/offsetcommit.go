package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// OffsetCommit, key 8: versions 2-9 (flexible from 8; v7+ static members).
// The retention time of v2-4 is ignored: offsets live as long as the group
// (and compaction) keeps them.
const (
	offsetCommitKey = 8
	offsetCommitMin = 2
	offsetCommitMax = 9
)

func offsetCommit(env kapi.Env, ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	gc := coordinator(env)
	if gc == nil {
		return offsetCommitError(req, kapi.GroupErr(errNoCoordinator))
	}
	var offsets []kapi.CommitOffset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			offsets = append(offsets, kapi.CommitOffset{TopicPartition: kapi.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata})
		}
	}
	ref := kapi.MemberRef{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation}
	errs, err := gc.CommitOffsets(ctx, ref, offsets)
	if err != nil {
		return offsetCommitError(req, kapi.GroupErr(err))
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if i < len(errs) {
				rp.ErrorCode = kapi.GroupErr(errs[i])
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func offsetCommitError(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
