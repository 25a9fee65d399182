package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// OffsetDelete, key 47: version 0. Offsets of topics the group still
// consumes are kept (GROUP_SUBSCRIBED_TO_TOPIC).
const (
	offsetDeleteKey = 47
	offsetDeleteMin = 0
	offsetDeleteMax = 0
)

func offsetDelete(env kapi.Env, ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	gc := coordinator(env)
	if gc == nil {
		return offsetDeleteError(req, kapi.GroupErr(errNoCoordinator))
	}
	var parts []kapi.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, kapi.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	errs, err := gc.DeleteOffsets(ctx, req.Group, parts)
	if err != nil {
		return offsetDeleteError(req, kapi.GroupErr(err))
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
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

func offsetDeleteError(req *kmsg.OffsetDeleteRequest, code int16) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}
