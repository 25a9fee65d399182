package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ListPartitionReassignments, key 46: version 0 (flexible). The running
// reassignments, from the metadata snapshot (the one HTTP GET
// /v1/topics/{t} shows as adding_replicas/removing_replicas). Null topics:
// every topic; a named topic or partition that does not exist or is not
// being reassigned is left out, as Kafka does.
const (
	listPartitionReassignmentsKey = 46
	listPartitionReassignmentsMin = 0
	listPartitionReassignmentsMax = 0
)

func listPartitionReassignments(env kapi.Env, _ context.Context, req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	cl, _ := env.Broker().Cluster()
	if req.Topics == nil {
		for i := range cl.Topics {
			if t, ok := reassigning(&cl.Topics[i], nil); ok {
				resp.Topics = append(resp.Topics, t)
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		ti, ok := cl.Topic(rt.Topic)
		if !ok {
			continue
		}
		if t, ok := reassigning(ti, rt.Partitions); ok {
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}

// reassigning lists the partitions of ti being reassigned, among only
// (all when nil).
func reassigning(ti *kapi.TopicInfo, only []int32) (kmsg.ListPartitionReassignmentsResponseTopic, bool) {
	t := kmsg.NewListPartitionReassignmentsResponseTopic()
	t.Topic = ti.Name
	add := func(p *kapi.PartitionInfo) {
		if len(p.Adding) == 0 && len(p.Removing) == 0 {
			return
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = p.Partition
		rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = orEmpty(p.Replicas), orEmpty(p.Adding), orEmpty(p.Removing)
		t.Partitions = append(t.Partitions, rp)
	}
	if only == nil {
		for i := range ti.Partitions {
			add(&ti.Partitions[i])
		}
	}
	for _, p := range only {
		if p >= 0 && int(p) < len(ti.Partitions) {
			add(&ti.Partitions[p])
		}
	}
	return t, len(t.Partitions) > 0
}

func listPartitionReassignmentsError(req *kmsg.ListPartitionReassignmentsRequest, code int16) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode = code
	return resp
}
