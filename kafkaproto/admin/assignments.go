package admin

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Explicit replica assignments in CreateTopics and CreatePartitions. The
// listener checks their shape (partitions 0..n-1 each once, the same
// replication factor for all, no broker twice in a partition); the Broker
// checks the brokers exist and are alive (ErrInvalidReplicaAssignment).

// topicAssignments turns CreateTopics' ReplicaAssignment into one replica
// list per partition, in partition order.
func topicAssignments(rt kmsg.CreateTopicsRequestTopic) ([][]int32, error) {
	if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
		return nil, fmt.Errorf("%w: a replica assignment needs num partitions and replication factor -1", kapi.ErrInvalidRequest)
	}
	ras := slices.Clone(rt.ReplicaAssignment)
	slices.SortFunc(ras, func(a, b kmsg.CreateTopicsRequestTopicReplicaAssignment) int {
		return int(a.Partition) - int(b.Partition)
	})
	out := make([][]int32, len(ras))
	for i, ra := range ras {
		if ra.Partition != int32(i) {
			return nil, fmt.Errorf("%w: partitions must be 0 to %d, each once", kapi.ErrInvalidReplicaAssignment, len(ras)-1)
		}
		out[i] = ra.Replicas
	}
	return out, checkAssignments(out, -1)
}

// checkAssignments checks every partition has rf replicas (rf -1: as many
// as the first), none twice.
func checkAssignments(as [][]int32, rf int) error {
	for p, r := range as {
		if rf < 0 {
			rf = len(r)
		}
		if len(r) == 0 || len(r) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", kapi.ErrInvalidReplicaAssignment, p, len(r), rf)
		}
		for i, id := range r {
			if slices.Contains(r[:i], id) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", kapi.ErrInvalidReplicaAssignment, p, id)
			}
		}
	}
	return nil
}

// createAssignedPartitions serves a CreatePartitions topic with an
// assignment.
func createAssignedPartitions(env kapi.Env, ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	pa, ok := env.Broker().(kapi.PartitionAssigner)
	if !ok {
		return fmt.Errorf("%w: manual partition assignment is not supported", kapi.ErrInvalidRequest)
	}
	cl, _ := env.Broker().Cluster()
	t, ok := cl.Topic(rt.Topic)
	if !ok {
		return fmt.Errorf("%w: %s", kapi.ErrUnknownTopicOrPartition, rt.Topic)
	}
	if want := int(rt.Count) - len(t.Partitions); want != len(rt.Assignment) {
		return fmt.Errorf("%w: %d new partitions, %d assignments", kapi.ErrInvalidReplicaAssignment, want, len(rt.Assignment))
	}
	as := make([][]int32, len(rt.Assignment))
	for i, a := range rt.Assignment {
		as[i] = a.Replicas
	}
	rf := -1
	if len(t.Partitions) > 0 {
		rf = len(t.Partitions[0].Replicas) - len(t.Partitions[0].Adding)
	}
	if err := checkAssignments(as, rf); err != nil {
		return err
	}
	return pa.CreateAssignedPartitions(ctx, rt.Topic, rt.Count, as, validateOnly)
}
