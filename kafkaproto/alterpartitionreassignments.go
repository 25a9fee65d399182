package kafkaproto

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments, key 45: version 0 (flexible). Each
// partition's Replicas starts moving it to that replica set; null
// replicas cancel its running reassignment (NO_REASSIGNMENT_IN_PROGRESS
// when none runs). Served by ClusterAdmin.ReassignPartition, the code path
// of HTTP PUT/DELETE /v1/topics/{t}/partitions/{p}/replicas. A request
// naming more than Options.MaxAdminTopics topics is refused.
const (
	alterPartitionReassignmentsKey = 45
	alterPartitionReassignmentsMin = 0
	alterPartitionReassignmentsMax = 0
)

func (s *Server) alterPartitionReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	ctx, cancel := adminContext(ctx, req.TimeoutMillis)
	defer cancel()
	ca, err := s.clusterAdmin()
	if err == nil {
		err = s.checkAdminTopics(len(req.Topics))
	}
	if err != nil {
		resp := alterPartitionReassignmentsError(req, kafkaErr(err))
		resp.ErrorMessage = errMessage(err)
		return resp
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			err := s.reassignOne(ctx, ca, rt.Topic, rp)
			p.ErrorCode, p.ErrorMessage = kafkaErr(err), errMessage(err)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *Server) reassignOne(ctx context.Context, ca ClusterAdmin, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) error {
	if rp.Replicas != nil && len(rp.Replicas) == 0 {
		return fmt.Errorf("%w: an empty replica set", ErrInvalidReplicaAssignment)
	}
	return ca.ReassignPartition(ctx, topic, rp.Partition, rp.Replicas)
}

func alterPartitionReassignmentsError(req *kmsg.AlterPartitionAssignmentsRequest, code int16) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
