package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// OffsetFetch, key 9: versions 1-9 (flexible from 6; v2+ null topics mean
// all; v8+ several groups per request). With RequireStable (v7+, KIP-447)
// a partition whose offset an open transaction has staged answers
// UNSTABLE_OFFSET_COMMIT (the client retries) until the transaction ends.
const (
	offsetFetchKey = 9
	offsetFetchMin = 1
	offsetFetchMax = 9
)

func offsetFetch(env kapi.Env, ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	gc := coordinator(env)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			var parts []kapi.TopicPartition
			if g.Topics != nil {
				parts = []kapi.TopicPartition{}
			}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, kapi.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			offs, err := fetchOffsets(ctx, gc, g.Group, parts)
			rg.ErrorCode = kapi.GroupErr(err)
			for _, t := range groupByTopic(offs) {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t[0].Topic
				for _, o := range t {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, o.Metadata
					if req.RequireStable && pendingTxnOffset(env, g.Group, o.TopicPartition) {
						rp.Offset, rp.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	var parts []kapi.TopicPartition
	if req.Topics != nil || req.Version < 2 {
		parts = []kapi.TopicPartition{}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, kapi.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	offs, err := fetchOffsets(ctx, gc, req.Group, parts)
	if err != nil {
		return offsetFetchError(req, kapi.GroupErr(err))
	}
	for _, t := range groupByTopic(offs) {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t[0].Topic
		for _, o := range t {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, o.Metadata
			if req.Version >= 7 && req.RequireStable && pendingTxnOffset(env, req.Group, o.TopicPartition) {
				rp.Offset, rp.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func fetchOffsets(ctx context.Context, gc kapi.GroupCoordinator, group string, parts []kapi.TopicPartition) ([]kapi.CommittedOffset, error) {
	if gc == nil {
		return nil, errNoCoordinator
	}
	return gc.FetchOffsets(ctx, group, parts)
}

// groupByTopic splits offsets into runs of one topic, in first-seen order.
func groupByTopic(offs []kapi.CommittedOffset) [][]kapi.CommittedOffset {
	var out [][]kapi.CommittedOffset
	idx := map[string]int{}
	for _, o := range offs {
		i, ok := idx[o.Topic]
		if !ok {
			i = len(out)
			idx[o.Topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], o)
	}
	return out
}

func offsetFetchError(req *kmsg.OffsetFetchRequest, code int16) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range req.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
