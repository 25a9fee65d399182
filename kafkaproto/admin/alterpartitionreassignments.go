package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AlterPartitionReassignments, key 45: versions 0-1 (flexible; v1 may
// forbid a change of replication factor: INVALID_REPLICATION_FACTOR). Each
// partition's Replicas starts moving it to that replica set; null
// replicas cancel its running reassignment (NO_REASSIGNMENT_IN_PROGRESS
// when none runs). Served by ClusterAdmin.ReassignPartition, the code path
// of HTTP PUT/DELETE /v1/topics/{t}/partitions/{p}/replicas. A request
// naming more than Options.MaxAdminTopics topics is refused.
const (
	alterPartitionReassignmentsKey = 45
	alterPartitionReassignmentsMin = 0
	alterPartitionReassignmentsMax = 1
)

func alterPartitionReassignments(env kapi.Env, ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	ctx, cancel := kapi.AdminContext(ctx, req.TimeoutMillis)
	defer cancel()
	ca, err := clusterAdmin(env)
	if err == nil {
		err = kapi.CheckAdminTopics(env, len(req.Topics))
	}
	if err != nil {
		resp := alterPartitionReassignmentsError(req, kapi.KafkaErr(err))
		resp.ErrorMessage = kapi.ErrMessage(err)
		return resp
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	keepRF := req.Version >= 1 && !req.AllowReplicationFactorChange
	cl, _ := env.Broker().Cluster()
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			var err error
			if keepRF {
				err = sameReplicationFactor(cl, rt.Topic, rp)
			}
			if err == nil {
				err = reassignOne(env, ctx, ca, rt.Topic, rp)
			}
			p.ErrorCode, p.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// sameReplicationFactor refuses a new replica set of another size when the
// request does not allow it (v1).
func sameReplicationFactor(cl *kapi.Cluster, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) error {
	t, ok := cl.Topic(topic)
	if !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) || rp.Replicas == nil {
		return nil // the reassignment itself answers these
	}
	p := &t.Partitions[rp.Partition]
	if rf := len(p.Replicas) - len(p.Adding); len(rp.Replicas) != rf { // before any running reassignment
		return fmt.Errorf("%w: the replication factor would change from %d to %d, which the request does not allow",
			kapi.ErrInvalidReplicationFactor, rf, len(rp.Replicas))
	}
	return nil
}

func reassignOne(env kapi.Env, ctx context.Context, ca kapi.ClusterAdmin, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) error {
	if rp.Replicas != nil && len(rp.Replicas) == 0 {
		return fmt.Errorf("%w: an empty replica set", kapi.ErrInvalidReplicaAssignment)
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
