package kafkaproto

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeTopicPartitions, key 75: version 0 (flexible). Metadata of
// topics by name (every topic when none is named), sorted by name, paged:
// at most ResponsePartitionLimit partitions (capped at
// describeTopicPartitionsLimit) from the cursor on, with a next cursor
// when more remain. runnel has no eligible leader replicas (KIP-966), so
// those lists are empty.
const (
	describeTopicPartitionsKey = 75
	describeTopicPartitionsMin = 0
	describeTopicPartitionsMax = 0
)

// describeTopicPartitionsLimit is Kafka's default
// max.request.partition.size.limit: the most partitions one answer holds.
const describeTopicPartitionsLimit = 2000

func (s *Server) describeTopicPartitions(ctx context.Context, req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	if err := kapi.CheckAdminTopics(s, len(req.Topics)); err != nil {
		return describeTopicPartitionsError(req, kapi.KafkaErr(err))
	}
	cl := s.clusterFor(ctx, req)
	budget := int(req.ResponsePartitionLimit)
	if budget <= 0 || budget > describeTopicPartitionsLimit {
		budget = describeTopicPartitionsLimit
	}
	for _, name := range topicNames(cl, req) {
		first := int32(0)
		if c := req.Cursor; c != nil && c.Topic == name {
			first = max(c.Partition, 0)
		}
		t, ok := cl.Topic(name)
		if !ok {
			resp.Topics = append(resp.Topics, unknownTopicPartitions(name))
			continue
		}
		rt, next := topicPartitions(ctx, cl, t, first, budget)
		resp.Topics = append(resp.Topics, rt)
		budget -= len(rt.Partitions)
		if next >= 0 {
			c := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			c.Topic, c.Partition = name, next
			resp.NextCursor = &c
			break
		}
	}
	return resp
}

// clusterFor returns the metadata, caught up first when a named topic is
// missing from it (it may have been created through another node).
func (s *Server) clusterFor(ctx context.Context, req *kmsg.DescribeTopicPartitionsRequest) *Cluster {
	cl, _ := s.broker.Cluster()
	for _, rt := range req.Topics {
		if _, ok := cl.Topic(rt.Topic); !ok {
			if cu, ok := s.broker.(MetadataCatchUp); ok && cu.CatchUpMetadata(ctx) {
				cl, _ = s.broker.Cluster()
			}
			break
		}
	}
	return cl
}

// topicNames is the sorted, de-duplicated topics to describe, from the
// cursor's topic on.
func topicNames(cl *Cluster, req *kmsg.DescribeTopicPartitionsRequest) []string {
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range cl.Topics {
			names = append(names, t.Name)
		}
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if c := req.Cursor; c != nil {
		i, _ := slices.BinarySearchFunc(names, c.Topic, strings.Compare)
		names = names[i:]
	}
	return names
}

// topicPartitions describes t's partitions from first on, at most budget
// of them; next is the first partition left out, or -1.
func topicPartitions(ctx context.Context, cl *Cluster, t *TopicInfo, first int32, budget int) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic, rt.TopicID, rt.IsInternal = kmsg.StringPtr(t.Name), t.ID, t.Internal
	for i := int(first); i < len(t.Partitions); i++ {
		if len(rt.Partitions) == budget {
			return rt, int32(i)
		}
		p := &t.Partitions[i]
		rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		rp.Partition, rp.LeaderEpoch = p.Partition, p.LeaderEpoch
		rp.LeaderID, rp.ErrorCode = listedLeader(ctx, cl, p.Leader)
		rp.Replicas, rp.ISR, rp.OfflineReplicas = orEmpty(p.Replicas), orEmpty(p.ISR), orEmpty(p.Offline)
		rp.EligibleLeaderReplicas, rp.LastKnownELR = []int32{}, []int32{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt, -1
}

func unknownTopicPartitions(name string) kmsg.DescribeTopicPartitionsResponseTopic {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), kapi.KafkaErr(ErrUnknownTopicOrPartition)
	if !kapi.ValidTopicName(name) {
		rt.ErrorCode = kapi.KafkaErr(ErrInvalidTopic)
	}
	return rt
}

func describeTopicPartitionsError(req *kmsg.DescribeTopicPartitionsRequest, code int16) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(t.Topic), code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
