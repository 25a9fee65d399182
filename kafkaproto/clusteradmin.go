package kafkaproto

import (
	"context"
	"fmt"
)

// ClusterAdmin is an optional extension of a Broker for the cluster admin
// APIs: ElectLeaders, AlterPartitionReassignments, DescribeLogDirs and
// DescribeQuorum. Against a Broker without it those APIs answer
// INVALID_REQUEST (errNoClusterAdmin) in every error field. Safe for
// concurrent use; errors map to codes through errors.go.
type ClusterAdmin interface {
	// ElectLeaders runs a leader election on the given partitions of
	// topic (every partition when partitions is nil): the preferred
	// replica, or with unclean an out-of-sync replica of a partition with
	// no leader when the topic allows it. It returns one result per
	// partition: nil (elected), ErrElectionNotNeeded,
	// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable or
	// ErrUnknownTopicOrPartition; a returned error fails every partition.
	ElectLeaders(ctx context.Context, topic string, partitions []int32, unclean bool) (map[int32]error, error)

	// ReassignPartition starts moving a partition to replicas, or cancels
	// its running reassignment when replicas is nil. Errors:
	// ErrUnknownTopicOrPartition, ErrInvalidReplicaAssignment,
	// ErrNoReassignmentInProgress, ErrNotController.
	ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) error

	// LogDirs is this broker's data directories and the partition
	// replicas each holds.
	LogDirs(ctx context.Context) ([]LogDir, error)

	// Quorum describes the metadata quorum as this node sees it.
	Quorum(ctx context.Context) (Quorum, error)
}

// LogDir is one data directory of a broker.
type LogDir struct {
	Path       string
	TotalBytes int64 // -1: unknown
	FreeBytes  int64 // -1: unknown
	Err        error // nil when healthy; ErrStorage when it refuses writes
	Partitions []LogDirPartition
}

// LogDirPartition is one replica in a data directory.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Size      int64
	OffsetLag int64 // how far the replica's log end trails the high watermark
}

// Quorum is the metadata quorum: Kafka's __cluster_metadata partition 0.
type Quorum struct {
	LeaderID      int32 // -1: none
	LeaderEpoch   int32 // the raft term
	HighWatermark int64 // the commit index
	Voters        []QuorumReplica
	Observers     []QuorumReplica // broker-only nodes following the log
}

// QuorumReplica is one member of the metadata quorum.
type QuorumReplica struct {
	ID             int32
	LogEndOffset   int64 // -1: unknown (unreachable)
	LastFetchMs    int64 // -1: unknown
	LastCaughtUpMs int64 // -1: unknown
	// Address is the host:port of its controller listener (the raft
	// port), listed in DescribeQuorum v2's Nodes; empty: none (observers).
	Address string
}

// errNoClusterAdmin answers cluster admin requests a Broker cannot serve.
var errNoClusterAdmin = fmt.Errorf("%w: this broker does not serve cluster admin requests", ErrInvalidRequest)

// clusterAdmin returns the broker's ClusterAdmin, or an error for
// requests that need one.
func (s *Server) clusterAdmin() (ClusterAdmin, error) {
	if ca, ok := s.broker.(ClusterAdmin); ok {
		return ca, nil
	}
	return nil, errNoClusterAdmin
}
