package kapi

import "context"

// The optional admin parts of a Broker, each found by the listener with a
// type assertion on its Broker: cluster admin (elections, reassignments,
// log dirs, the quorum), ACLs, client quotas, producer states and
// assigned partitions.

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

// ACLAdmin is optionally implemented by a Broker that keeps ACLs; without
// it the ACL APIs answer SECURITY_DISABLED, as Kafka without an
// authorizer does. Safe for concurrent use. Errors wrap the sentinels of
// errors.go (ErrInvalidRequest for a bad ACL).
type ACLAdmin interface {
	CreateACLs(ctx context.Context, acls []ACL) error
	DescribeACLs(ctx context.Context, f ACL) ([]ACL, error)
	// DeleteACLs removes the ACLs f selects and returns them.
	DeleteACLs(ctx context.Context, f ACL) ([]ACL, error)
}

// ACL is one entry, or a filter where "" matches any value. Names are
// lower case: topic, group, cluster, transactional_id; literal, prefixed;
// read, write, ..., all; allow, deny.
type ACL struct {
	ResourceType, ResourceName, PatternType string
	Principal, Host, Operation, Permission  string
}

// QuotaEntityPart is one part of a quota entity: Type "user" or
// "client-id"; a nil Name is the default entity of that type.
type QuotaEntityPart struct {
	Type string
	Name *string
}

// ClientQuota is one entity's quota values (producer_byte_rate,
// consumer_byte_rate, request_percentage).
type ClientQuota struct {
	Entity []QuotaEntityPart
	Values map[string]float64
}

// QuotaFilter is one DescribeClientQuotas component: Match 0 exact (Name),
// 1 the default, 2 any.
type QuotaFilter struct {
	Type  string
	Match int8
	Name  string
}

// QuotaAdmin is optionally implemented by a Broker that keeps client
// quotas; without it the quota APIs answer UNSUPPORTED_VERSION. Safe for
// concurrent use. Errors wrap the sentinels of errors.go
// (ErrInvalidRequest for a bad entity or key).
type QuotaAdmin interface {
	DescribeClientQuotas(ctx context.Context, fs []QuotaFilter, strict bool) ([]ClientQuota, error)
	// AlterClientQuota sets the keys of set and removes those of remove
	// in one entity's quota (nothing when validateOnly).
	AlterClientQuota(ctx context.Context, entity []QuotaEntityPart, set map[string]float64, remove []string, validateOnly bool) error
}

// ProducerStates is an optional extension of a Broker: the producer state
// of a partition this broker leads (ErrNotLeader otherwise,
// ErrUnknownTopicOrPartition when it does not exist). Safe for concurrent
// use.
type ProducerStates interface {
	ActiveProducers(ctx context.Context, topic string, partition int32) ([]ActiveProducer, error)
}

// ActiveProducer is one idempotent producer a partition remembers.
type ActiveProducer struct {
	ID            int64
	Epoch         int16
	LastSequence  int32 // -1: none
	LastTimestamp int64 // unix ms of its last write; -1: unknown
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker here, -1 when none did.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the producer's open
	// transaction in the partition, -1 when none is open.
	TxnStartOffset int64
}

// PartitionAssigner is an optional extension of a Broker: CreatePartitions
// with the replicas of each new partition given (assignments[i] for
// partition current+i). Without it such requests are INVALID_REQUEST.
// Safe for concurrent use.
type PartitionAssigner interface {
	CreateAssignedPartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error
}
