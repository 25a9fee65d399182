package api

import (
	"context"
	"time"
)

// GroupsBackend is the optional part of a Backend that serves consumer
// groups (GET/POST/DELETE /v1/groups...). The handler finds it with a type
// assertion; without it those routes answer 501. Every method is safe for
// concurrent use; errors wrap the sentinels of errors.go (ErrUnknownGroup,
// ErrConflict for a change an active group forbids, ErrNotLeader when the
// group's coordinator cannot be reached). JoinGroup and PollGroup block
// (bounded by the rebalance timeout and req.Wait) or until ctx is done.
type GroupsBackend interface {
	// ListGroups lists one page of groups ordered by name (see ListQuery),
	// computing lag for that page only.
	ListGroups(ctx context.Context, q ListQuery) (GroupPage, error)
	DescribeGroup(ctx context.Context, group string) (GroupDetail, error)
	DeleteGroup(ctx context.Context, group string) error
	GroupOffsets(ctx context.Context, group string) ([]GroupOffset, error)
	// CommitGroupOffsets commits offsets; without MemberID only for a group
	// with no active members (ErrConflict otherwise).
	CommitGroupOffsets(ctx context.Context, group string, req GroupCommitRequest) ([]GroupOffset, error)
	// ResetGroupOffsets plans (and unless DryRun commits) new offsets for
	// a group with no active members.
	ResetGroupOffsets(ctx context.Context, group string, req GroupResetRequest) (GroupResetResult, error)

	// JoinGroup adds an HTTP member and waits for its first assignment.
	JoinGroup(ctx context.Context, group string, req GroupJoinRequest) (GroupMembership, error)
	// PollGroup reads the member's assigned partitions from its positions
	// (long polling up to req.Wait); every poll is a heartbeat.
	PollGroup(ctx context.Context, group, member string, req GroupPollRequest) (GroupPollResult, error)
	// CommitMember commits offsets for a member; nil offsets commit the
	// positions its polls reached.
	CommitMember(ctx context.Context, group, member string, offsets []GroupOffset) ([]GroupOffset, error)
	LeaveGroup(ctx context.Context, group, member string) error
}

// GroupSummary is one row of GET /v1/groups.
type GroupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Members      int    `json:"members"`
	Coordinator  int32  `json:"coordinator"`
	Lag          int64  `json:"lag"`
}

// GroupDetail is GET /v1/groups/{group}.
type GroupDetail struct {
	Group        string              `json:"group"`
	State        string              `json:"state"`
	ProtocolType string              `json:"protocol_type"`
	Protocol     string              `json:"protocol"`
	Generation   int32               `json:"generation"`
	Leader       string              `json:"leader"`
	Coordinator  int32               `json:"coordinator"`
	Members      []GroupMemberDetail `json:"members"`
	Offsets      []GroupPartitionLag `json:"offsets"`
	Lag          int64               `json:"lag"`
}

// GroupMemberDetail is one member of a group.
type GroupMemberDetail struct {
	MemberID   string            `json:"member_id"`
	InstanceID *string           `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id"`
	ClientHost string            `json:"client_host"`
	Kind       string            `json:"kind"` // kafka or http
	Assignment []TopicPartitions `json:"assignment"`
}

// TopicPartitions is a topic and some of its partitions.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// GroupPartitionLag is one committed offset with its lag: EndOffset minus
// CommittedOffset records, and LagMS, the age of the record at the
// committed offset (0 when caught up; absent when unknown).
type GroupPartitionLag struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	CommittedOffset int64   `json:"committed_offset"`
	Metadata        *string `json:"metadata,omitempty"`
	EndOffset       int64   `json:"end_offset"`
	Lag             int64   `json:"lag"`
	LagMS           *int64  `json:"lag_ms,omitempty"`
}

// GroupOffset is one offset to commit or a committed one.
type GroupOffset struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Metadata  *string `json:"metadata,omitempty"`
}

// GroupOffsets is GET and POST /v1/groups/{group}/offsets.
type GroupOffsets struct {
	Group   string        `json:"group"`
	Offsets []GroupOffset `json:"offsets"`
}

// GroupCommitRequest is POST /v1/groups/{group}/offsets.
type GroupCommitRequest struct {
	Offsets    []GroupOffset `json:"offsets"`
	MemberID   string        `json:"member_id,omitempty"`
	Generation *int32        `json:"generation,omitempty"`
}

// Reset strategies.
const (
	ResetEarliest  = "earliest"
	ResetLatest    = "latest"
	ResetTimestamp = "timestamp"
	ResetOffset    = "offset"
)

// GroupResetRequest is POST /v1/groups/{group}/offsets/reset. Topics empty:
// every topic the group has offsets for. DryRun defaults to true.
type GroupResetRequest struct {
	Strategy  string   `json:"strategy"`
	Timestamp *int64   `json:"timestamp,omitempty"`
	Offset    *int64   `json:"offset,omitempty"`
	Topics    []string `json:"topics,omitempty"`
	DryRun    *bool    `json:"dry_run,omitempty"`
}

// GroupResetResult lists the planned (or committed) offsets.
type GroupResetResult struct {
	Group   string          `json:"group"`
	DryRun  bool            `json:"dry_run"`
	Offsets []PlannedOffset `json:"offsets"`
}

// PlannedOffset is one partition of a reset; CurrentOffset -1: none.
type PlannedOffset struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"`
	NewOffset     int64  `json:"new_offset"`
}

// GroupJoinRequest is POST /v1/groups/{group}/members.
type GroupJoinRequest struct {
	Topics           []string `json:"topics"`
	ClientID         string   `json:"client_id,omitempty"`
	SessionTimeoutMS int32    `json:"session_timeout_ms,omitempty"`
	AutoOffsetReset  string   `json:"auto_offset_reset,omitempty"` // earliest (default) or latest
	ClientHost       string   `json:"-"`                           // the caller's address, set by the handler
}

// GroupMembership is an HTTP member's view of its group.
type GroupMembership struct {
	Group       string            `json:"group"`
	MemberID    string            `json:"member_id"`
	Generation  int32             `json:"generation"`
	State       string            `json:"state"`
	Assignment  []TopicPartitions `json:"assignment"`
	Rebalancing bool              `json:"rebalancing"`
}

// GroupPollRequest is the query of GET .../members/{member}/records.
type GroupPollRequest struct {
	MaxRecords int
	MaxBytes   int
	Wait       time.Duration
	// ReadUncommitted: as in ConsumeRequest.
	ReadUncommitted bool
}

// GroupRecord is a consumed record with its topic.
type GroupRecord struct {
	Topic string
	ConsumedRecord
}

// GroupPollResult is what a poll read; Records are empty while the group
// rebalances.
type GroupPollResult struct {
	GroupMembership
	Records []GroupRecord
}

// GroupList is GET /v1/groups: one page of groups, and the cursor of the
// next page when there is one.
type GroupList struct {
	Groups     []GroupSummary `json:"groups"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// GroupPage is one page of groups and whether more follow it.
type GroupPage struct {
	Groups []GroupSummary
	More   bool
}

// Group list pages: the default and largest page sizes.
const (
	DefaultGroupPage = 1000
	MaxGroupPage     = 10000
)

// GroupMemberOffsets is the optional body of POST .../members/{member}/offsets.
type GroupMemberOffsets struct {
	Offsets []GroupOffset `json:"offsets,omitempty"`
}
