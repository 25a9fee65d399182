package kapi

import (
	"context"
	"net"
)

// GroupCoordinator is the optional part of a Broker that serves consumer
// groups (the classic protocol: the coordinator only relays the assignment
// the group's leader computes). The listener finds it with a type assertion
// on its Broker; without it the group APIs answer COORDINATOR_NOT_AVAILABLE.
//
// Every method is safe for concurrent use. JoinGroup and SyncGroup block
// until the group's rebalance lets them answer (bounded by the rebalance
// timeout) or ctx is done. Errors are matched with errors.Is against the
// sentinels in errors.go (GroupErr); a method returning a group-level error
// fails every partition of the request with it. The listener copies every byte
// slice it passes (metadata, assignments), so the coordinator may keep them.
type GroupCoordinator interface {
	// GroupCoordinatorID returns the node id of the broker coordinating
	// group: the leader of the offsets topic partition the group hashes to.
	// It may create the offsets topic. ErrCoordinatorNotAvailable when the
	// partition has no leader.
	GroupCoordinatorID(ctx context.Context, group string) (int32, error)

	// JoinGroup joins (or rejoins) a member; see JoinRequest.
	JoinGroup(ctx context.Context, req JoinRequest) (JoinResult, error)
	// SyncGroup hands the leader's assignment to the coordinator (leader)
	// or waits for it (followers); it returns the member's assignment.
	SyncGroup(ctx context.Context, req SyncRequest) (SyncResult, error)
	// Heartbeat keeps a member alive. ErrRebalanceInProgress tells it to
	// rejoin.
	Heartbeat(ctx context.Context, m MemberRef) error
	// LeaveGroup removes members; the result holds one error per member.
	LeaveGroup(ctx context.Context, group string, members []MemberRef) ([]error, error)

	// CommitOffsets stores offsets for a member of the current generation
	// (or, with generation -1 and no member id, for an empty group). The
	// result holds one error per offset (nil when stored).
	CommitOffsets(ctx context.Context, m MemberRef, offsets []CommitOffset) ([]error, error)
	// FetchOffsets returns committed offsets; parts nil means every
	// partition the group has an offset for. A partition without one has
	// Offset -1.
	FetchOffsets(ctx context.Context, group string, parts []TopicPartition) ([]CommittedOffset, error)
	// DeleteOffsets removes committed offsets of partitions the group
	// does not consume (ErrGroupSubscribedToTopic per partition otherwise).
	DeleteOffsets(ctx context.Context, group string, parts []TopicPartition) ([]error, error)

	// ListGroups lists the groups this broker coordinates.
	ListGroups(ctx context.Context) ([]GroupListing, error)
	// DescribeGroup describes one group this broker coordinates; a group
	// that does not exist is described in state "Dead" without error.
	DescribeGroup(ctx context.Context, group string) (GroupDescription, error)
	// DeleteGroup deletes an empty group and its offsets
	// (ErrNonEmptyGroup, ErrGroupIDNotFound).
	DeleteGroup(ctx context.Context, group string) error
}

// MemberRef names a group member as a request gives it.
type MemberRef struct {
	Group      string
	MemberID   string
	InstanceID *string // static membership (group.instance.id), nil when dynamic
	Generation int32   // -1 when the request carries none
	Reason     string  // LeaveGroup v5+, optional
}

// GroupProtocol is one assignment protocol a joining member supports.
type GroupProtocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	MemberRef
	ClientID         string
	ClientHost       string
	SessionTimeout   int32 // ms
	RebalanceTimeout int32 // ms (v0: the session timeout)
	ProtocolType     string
	Protocols        []GroupProtocol
	// RequireKnownMemberID (v4+): a join without member id gets a new id
	// and ErrMemberIDRequired, and must rejoin with it.
	RequireKnownMemberID bool
}

// JoinResult is a JoinGroup answer. MemberID is set with
// ErrMemberIDRequired too.
type JoinResult struct {
	Generation   int32
	ProtocolType string
	Protocol     string
	LeaderID     string
	MemberID     string
	Members      []JoinedMember // only for the leader
}

// JoinedMember is one member's metadata for the chosen protocol.
type JoinedMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// SyncRequest is a SyncGroup request; Assignments come from the leader.
type SyncRequest struct {
	MemberRef
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  map[string][]byte
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommitOffset is one offset to commit.
type CommitOffset struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32 // -1: unknown
	Metadata    *string
}

// CommittedOffset is one committed offset (-1 when none).
type CommittedOffset struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// GroupListing is one group in ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string // Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
}

// GroupDescription is one group in DescribeGroups.
type GroupDescription struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string
	Members      []GroupMember
}

// GroupMember is one member in DescribeGroups.
type GroupMember struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte // for the group's protocol
	Assignment []byte
}

// clientKey carries the request header's client id and the peer's host to
// the group handlers (JoinGroup records them; DescribeGroups shows them).
type clientKey struct{}

// Client is who sent a request: the header's client id and the peer's host.
type Client struct {
	ID, Host string
}

// WithClient records a group request's client id and remote address; the
// listener calls it for the APIs whose handlers read ClientOf.
func WithClient(ctx context.Context, clientID string, remote net.Addr) context.Context {
	host := ""
	if remote != nil {
		host = remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	return context.WithValue(ctx, clientKey{}, Client{ID: clientID, Host: host})
}

// ClientOf is the client WithClient recorded in ctx (zero when none).
func ClientOf(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}
