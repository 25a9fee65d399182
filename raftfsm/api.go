package raftfsm

// The contract the node and the server are coded against: errors, the
// metadata model, the commands and a node's view of the quorum (Server,
// Status). The node that runs them on raft is package quorum.

import (
	"errors"
	"time"
)

var (
	// ErrNotLeader: no leader took the command before ctx ended (Apply and
	// the other leader calls forward and retry until then), or it was lost
	// in flight (leadership or the connection to the leader lost), when it
	// may still apply: only ErrNotLeader itself means nothing was proposed.
	ErrNotLeader         = errors.New("raftfsm: not the active controller")
	ErrTopicExists       = errors.New("raftfsm: topic already exists")
	ErrUnknownTopic      = errors.New("raftfsm: unknown topic")
	ErrUnknownBroker     = errors.New("raftfsm: unknown broker")
	ErrStaleEpoch        = errors.New("raftfsm: stale leader or partition epoch")
	ErrInvalidPartitions = errors.New("raftfsm: invalid partition count")
	// ErrInvalidReplicationFactor: outside 1..Limits.MaxReplicationFactor.
	ErrInvalidReplicationFactor = errors.New("raftfsm: invalid replication factor")
	// ErrInvalidTopicName: not a legal topic name (ValidateTopicName).
	ErrInvalidTopicName = errors.New("raftfsm: invalid topic name")
	// ErrPolicyViolation: a valid request that the cluster-wide Limits
	// (partitions in the cluster or on a broker) refuse.
	ErrPolicyViolation   = errors.New("raftfsm: refused by the cluster's limits")
	ErrNotEnoughBrokers  = errors.New("raftfsm: replication factor larger than the available brokers")
	ErrClosed            = errors.New("raftfsm: node closed")
	ErrUnknownPartition  = errors.New("raftfsm: unknown partition")
	ErrInvalidAssignment = errors.New("raftfsm: invalid replica assignment")
	ErrInvalidCommand    = errors.New("raftfsm: invalid command")
	// ErrQuorumChange: a controller membership change refused because it
	// could break the quorum (the new voter does not answer or catch up, or
	// too few voters would remain reachable).
	ErrQuorumChange = errors.New("raftfsm: quorum change refused")
	// ErrNoReassignment: a reassignment to cancel is not in progress.
	ErrNoReassignment = errors.New("raftfsm: no reassignment in progress")
	// ErrIneligibleReplica: an ISR change would add a broker that is fenced
	// or shutting down (KIP-841; Kafka's INELIGIBLE_REPLICA).
	ErrIneligibleReplica = errors.New("raftfsm: replica not eligible for the ISR")
	// ErrInvalidConfig: a config change the topic's current value makes
	// invalid (a ConfigListOp emptying a list that needs a value).
	ErrInvalidConfig = errors.New("raftfsm: invalid config")
	// ErrUnsupportedCommand: a command written by a newer version than
	// this node applies (its version above CommandVersion, or a field or
	// kind this version does not know). The FSM never skips one: it stops
	// the node (see command.go), as skipping or dropping the unknown part
	// would leave it with metadata that differs from its peers'.
	ErrUnsupportedCommand = errors.New("raftfsm: command from a newer version")
)

// Server is one controller (Raft voter).
type Server struct {
	ID      int32
	Address string // raft host:port
}

// Status is a node's view of the quorum (quorum.Node.Status).
type Status struct {
	ID           int32
	Address      string // raft address this node advertises
	Voter        bool   // false: a broker-only node (a raft non-voter, Role "follower")
	Role         string // "leader", "follower", "candidate", "shutdown"; "unreachable" from ControllerStatuses
	Term         uint64
	LeaderID     int32 // -1 when unknown
	LeaderAddr   string
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64 // handed to the FSM by raft (may still be applying)
	// MetadataIndex is the index of the published metadata image (the last
	// command applied); what CatchUp waits for.
	MetadataIndex uint64
	Voters        []Server
	// CommandVersion is the newest command version this node applies
	// (raftfsm.CommandVersion of its binary); 0 from a node older than
	// command versioning, which applies version 1 only. The active
	// controller raises the cluster's version once every node reports it.
	CommandVersion uint8 `json:",omitempty"`
}

// Image is the metadata at one applied index. Immutable.
type Image struct {
	Index          uint64 // last applied raft index (the metadata offset)
	ClusterID      string
	Brokers        map[int32]*Broker
	Topics         TopicMap // topicmap.go: persistent, shared between versions
	NextProducerID int64
	Users          map[string]*User    // users.go
	ACLs           map[string]ACLEntry // acls.go, by ACLEntry.Key
	Tokens         map[string]*Token   // tokens.go, by id
	Quotas         map[string]Quota    // quotas.go, by QuotaEntity.Key
	// CommandVersion is the cluster's command version: the newest that
	// every node applies, raised by SetCommandVersion (0 before any: 1).
	// Commands and stored state of a newer version are written only once
	// it allows them.
	CommandVersion uint8

	load *partitionLoad // counts kept by the FSM (load.go); nil in images built elsewhere

	// The access maps a change has copied (image.go: the others are
	// shared with the previous image), and the ACL map's number
	// (SameACLs; 0 in images built elsewhere).
	owned       ownedMaps
	aclsVersion uint64

	// The topics changed by recent batches (topicchanges.go), complete
	// after the image at changesFrom; tracked only in the FSM's images.
	changes     *topicChanges
	changesFrom uint64
	tracked     bool
}

type BrokerState string

const (
	BrokerAlive        BrokerState = "alive"
	BrokerFenced       BrokerState = "fenced"
	BrokerShuttingDown BrokerState = "shutting_down"
)

type Broker struct {
	ID            int32
	IncarnationID string
	Epoch         int64 // the raft index of its registration
	Rack          string
	HTTPAddr      string
	KafkaAddr     string
	KafkaTLSAddr  string `json:",omitempty"` // the Kafka SSL listener; empty: none
	RaftAddr      string // its node's raft/mux address (DialNode)
	State         BrokerState
	// Heartbeats: registered by Node.RegisterBroker, so the active
	// controller fences it when its heartbeats lapse. A broker registered
	// with a plain Apply (false) is never fenced automatically.
	Heartbeats bool
}

// Liveness is what the active controller knows of a broker's session.
type Liveness struct {
	LastHeartbeat time.Time // zero: none since this controller took over
	AppliedIndex  uint64    // metadata index the broker reported applied
	StorageError  string    // Config.BrokerHealth of its last heartbeat
}

type Topic struct {
	ID         [16]byte // random UUID, Kafka's topic id
	Name       string
	Configs    map[string]string // only explicitly set configs
	Partitions []Partition       // index = partition id
}

type Partition struct {
	Leader         int32 // -1: offline
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// Reassignment is set while a reassignment runs (see
	// ReassignPartition), nil otherwise: Replicas is then the target
	// followed by the replicas being removed. It sits behind a pointer so
	// that a partition takes 72 bytes, not the 112 of two more lists: a
	// leader move copies its topic's partitions (copy on write of the
	// image), and a controlled shutdown's cost was mostly those bytes
	// (allocating, zeroing, copying and marking them, and the page faults
	// of fresh memory). Its JSON is a partition's as before this field
	// (partitionFields): stored topics, digests and RPC results are
	// unchanged.
	Reassignment *Reassignment
}

// Reassignment is what a running reassignment adds to a partition's
// replicas and removes from them; at least one of the lists is non-nil.
// Published ones are never modified.
type Reassignment struct {
	Adding   []int32
	Removing []int32
}

// Command is the versioned envelope of every metadata change.
// Exactly one of the pointers is set.
type Command struct {
	Version             uint8
	CreateTopic         *CreateTopic         `json:",omitempty"`
	DeleteTopic         *DeleteTopic         `json:",omitempty"`
	AlterConfigs        *AlterConfigs        `json:",omitempty"`
	CreatePartitions    *CreatePartitions    `json:",omitempty"`
	RegisterBroker      *RegisterBroker      `json:",omitempty"`
	SetBrokerState      *SetBrokerState      `json:",omitempty"`
	ChangePartition     *ChangePartition     `json:",omitempty"`
	ChangePartitions    *ChangePartitions    `json:",omitempty"`
	AllocateProducerIDs *AllocateProducerIDs `json:",omitempty"`
	InitCluster         *InitCluster         `json:",omitempty"`
	ReassignPartition   *ReassignPartition   `json:",omitempty"`
	UpsertUserScram     *UpsertUserScram     `json:",omitempty"`
	DeleteUser          *DeleteUser          `json:",omitempty"`
	CreateACLs          *CreateACLs          `json:",omitempty"`
	DeleteACLs          *DeleteACLs          `json:",omitempty"`
	CreateToken         *CreateToken         `json:",omitempty"`
	DeleteToken         *DeleteToken         `json:",omitempty"`
	SetQuotas           *SetQuotas           `json:",omitempty"`
	// Version 2.
	SetCommandVersion     *SetCommandVersion     `json:",omitempty"`
	ChangePartitionsBatch *ChangePartitionsBatch `json:",omitempty"`
}

// Command versions (command.go has the rules and the encodings).
//
//	1  the JSON envelope: every command up to SetQuotas, with the
//	   AlterConfigs ListOps and the Quota Merge/Remove fields (which came
//	   without a version of their own: a node older than them drops them)
//	2  SetCommandVersion; ChangePartitionsBatch in the binary envelope;
//	   topics stored in the binary form (state.go)
//
// CommandVersion is the newest version this package applies and writes;
// MinCommandVersion the oldest it applies. Apply fills in a zero Version
// with the lowest version that expresses the command (MinVersion).
const (
	CommandVersion    = 2
	MinCommandVersion = 1
)

// SetCommandVersion raises the cluster's command version (Image.
// CommandVersion) to Version, which must be above the current one and at
// most CommandVersion. The active controller proposes it once every node
// of the raft configuration reports it applies Version. Result: int64,
// the version in effect. A node that cannot apply Version stops on it.
type SetCommandVersion struct{ Version uint8 }

// ChangePartitionsBatch is ChangePartitions for many topics in one command
// (the controller moves leaders with it, as KRaft batches its partition
// change records): each topic's changes apply as one ChangePartitions.
// Version 2, in the binary envelope (a change costs about 10 bytes, not
// 100 of JSON). Result: int64, the number of changes applied.
type ChangePartitionsBatch struct {
	Topics []ChangePartitions
}

// InitCluster sets the cluster id if it is not set yet (the first one applied
// wins). The node proposes it itself when it becomes leader of a cluster
// without id. Result: string, the cluster id in effect.
type InitCluster struct{ ClusterID string }

// CreateTopic result: *Topic. Assignments nil: the node places replicas over
// the alive brokers (balanced, rack-aware) before proposing. TopicID zero: the
// node picks a random one before proposing.
type CreateTopic struct {
	Name              string
	TopicID           [16]byte
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	Assignments       [][]int32
}

// DeleteTopic result: *Topic, the deleted topic.
type DeleteTopic struct{ Name string }

// AlterConfigs result: *Topic. Set and Delete apply first, then ListOps
// in order.
type AlterConfigs struct {
	Topic  string
	Set    map[string]string
	Delete []string
	// ListOps change list configs (Kafka's incremental APPEND and
	// SUBTRACT) from the value the topic has in the log's order: a node
	// that built the new value from its own image, which may lag, would
	// lose a change made meanwhile through another node.
	ListOps []ConfigListOp `json:",omitempty"`
}

// ConfigListOp adds Values to a comma-separated list config (without
// duplicates) or, with Subtract, removes them. Default is the config's
// value when the topic does not set it; a config whose default is not
// empty may not become empty (ErrInvalidConfig), as Kafka refuses an
// empty cleanup.policy.
type ConfigListOp struct {
	Name     string
	Subtract bool `json:",omitempty"`
	Values   []string
	Default  string `json:",omitempty"`
}

// CreatePartitions grows a topic to Count partitions. Result: *Topic.
// Assignments (for the new partitions only) nil: the node places them.
type CreatePartitions struct {
	Topic       string
	Count       int32
	Assignments [][]int32
}

// RegisterBroker result: *Broker (with its new Epoch). With Heartbeats the
// broker starts fenced, and the active controller unfences it once its
// heartbeats show it applied the metadata up to its registration.
type RegisterBroker struct {
	ID            int32
	IncarnationID string
	Rack          string
	HTTPAddr      string
	KafkaAddr     string
	KafkaTLSAddr  string `json:",omitempty"`
	RaftAddr      string `json:",omitempty"`
	Heartbeats    bool   `json:",omitempty"`
}

// SetBrokerState changes a broker's state if Epoch is its current epoch (else
// ErrStaleEpoch). Result: *Broker.
type SetBrokerState struct {
	ID    int32
	Epoch int64
	State BrokerState
}

// ChangePartition sets leader and ISR if LeaderEpoch and PartitionEpoch match
// the current ones (else ErrStaleEpoch). Result: *Partition.
type ChangePartition struct {
	Topic          string
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Leader         int32
	ISR            []int32
}

// ChangePartitions applies many ChangePartition to one topic in one command
// (the controller moves leaders with it): a change with stale epochs or an
// invalid leader/ISR is skipped, the others apply. The Topic field of each
// change is ignored. Result: int64, the number of changes applied.
type ChangePartitions struct {
	Topic   string
	Changes []ChangePartition
}

// AllocateProducerIDs result: int64, the first of Count new producer ids.
type AllocateProducerIDs struct{ Count int64 }
