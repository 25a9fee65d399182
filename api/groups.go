package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"
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

type wireGroupRecord struct {
	Topic string `json:"topic"`
	wireConsumed
}

type wireGroupPoll struct {
	GroupMembership
	Records []wireGroupRecord `json:"records"`
}

// groupsResource serves /v1/groups (GroupsBackend).
type groupsResource struct{ h *handler }

func (g groupsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", g.list)
	r.Get("/{group}", g.describe)
	r.Delete("/{group}", g.delete)
	r.Get("/{group}/offsets", g.offsets)
	r.Post("/{group}/offsets", g.commit)
	r.Post("/{group}/offsets/reset", g.reset)
	r.Post("/{group}/members", g.join)
	r.Get("/{group}/members/{member}/records", g.poll)
	r.Post("/{group}/members/{member}/offsets", g.commitMember)
	r.Delete("/{group}/members/{member}", g.leave)
	return r
}

func (g groupsResource) backend(w http.ResponseWriter, r *http.Request) (GroupsBackend, bool) {
	gb, ok := g.h.b.(GroupsBackend)
	if !ok {
		g.h.problem(w, r, fmt.Errorf("%w: consumer groups", ErrNotImplemented))
	}
	return gb, ok
}

// groupParam returns the {group} path parameter, unescaped (a group id may
// hold any character, "/" included).
func groupParam(r *http.Request) (string, error) {
	name := pathParam(r, "group")
	if name == "" || len(name) > 255 {
		return "", &FieldError{Field: "path.group", Err: ErrInvalidRequest, Msg: "must be 1 to 255 characters"}
	}
	return name, nil
}

// pathParam returns a path parameter unescaped.
func pathParam(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if un, err := url.PathUnescape(v); err == nil {
		return un
	}
	return v
}

// groupCall runs fn with the backend and the group, answering problems.
func (g groupsResource) groupCall(w http.ResponseWriter, r *http.Request, fn func(GroupsBackend, string) (any, int, error)) {
	gb, ok := g.backend(w, r)
	if !ok {
		return
	}
	name, err := groupParam(r)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	out, status, err := fn(gb, name)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	if out == nil {
		w.WriteHeader(status)
		return
	}
	g.h.writeJSON(w, r, status, out)
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

func (g groupsResource) list(w http.ResponseWriter, r *http.Request) {
	gb, ok := g.backend(w, r)
	if !ok {
		return
	}
	query, err := listQueryParams(r, DefaultGroupPage, MaxGroupPage)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	page, err := gb.ListGroups(r.Context(), query)
	if err != nil {
		g.h.problem(w, r, err)
		return
	}
	out := GroupList{Groups: page.Groups}
	if out.Groups == nil {
		out.Groups = []GroupSummary{}
	}
	if page.More && len(page.Groups) > 0 {
		out.NextCursor = nextPage(w, r, page.Groups[len(page.Groups)-1].Group)
	}
	g.h.writeJSON(w, r, http.StatusOK, out)
}

func (g groupsResource) describe(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		d, err := gb.DescribeGroup(r.Context(), name)
		return normalizeGroup(d), http.StatusOK, err
	})
}

func normalizeGroup(d GroupDetail) GroupDetail {
	if d.Members == nil {
		d.Members = []GroupMemberDetail{}
	}
	for i := range d.Members {
		d.Members[i].Assignment = nonNilAssignment(d.Members[i].Assignment)
	}
	if d.Offsets == nil {
		d.Offsets = []GroupPartitionLag{}
	}
	return d
}

func nonNilAssignment(a []TopicPartitions) []TopicPartitions {
	if a == nil {
		return []TopicPartitions{}
	}
	return a
}

func (g groupsResource) delete(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		return nil, http.StatusNoContent, gb.DeleteGroup(r.Context(), name)
	})
}

func groupOffsets(name string, offs []GroupOffset) GroupOffsets {
	if offs == nil {
		offs = []GroupOffset{}
	}
	return GroupOffsets{Group: name, Offsets: offs}
}

func (g groupsResource) offsets(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		offs, err := gb.GroupOffsets(r.Context(), name)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) commit(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		var req GroupCommitRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		offs, err := gb.CommitGroupOffsets(r.Context(), name, req)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) reset(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		var req GroupResetRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		switch {
		case req.Strategy == ResetTimestamp && req.Timestamp == nil:
			return nil, 0, &FieldError{Field: "body.timestamp", Err: ErrInvalidRequest, Msg: "required by strategy timestamp"}
		case req.Strategy == ResetOffset && req.Offset == nil:
			return nil, 0, &FieldError{Field: "body.offset", Err: ErrInvalidRequest, Msg: "required by strategy offset"}
		}
		res, err := gb.ResetGroupOffsets(r.Context(), name, req)
		if res.Offsets == nil {
			res.Offsets = []PlannedOffset{}
		}
		res.Group = name
		return res, http.StatusOK, err
	})
}

func (g groupsResource) join(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		var req GroupJoinRequest
		if err := decodeJSONBody(r, &req); err != nil {
			return nil, 0, err
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			req.ClientHost = host
		}
		m, err := gb.JoinGroup(r.Context(), name, req)
		m.Assignment = nonNilAssignment(m.Assignment)
		return m, http.StatusOK, err
	})
}

// groupPollCost is what a group poll holds per byte of max_bytes: its
// answer is built whole before it is written (records, their JSON, the body).
const groupPollCost = 5

func (g groupsResource) poll(w http.ResponseWriter, r *http.Request) {
	if wait := r.URL.Query().Get("wait_ms"); wait != "" && wait != "0" {
		client := g.h.opts.ClientAddr(r)
		if err := g.h.longPolls.take(client); err != nil {
			g.h.problem(w, r, err)
			return
		}
		defer g.h.longPolls.release(client)
	}
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		q := r.URL.Query()
		maxRecords, err := intParam(q, "max_records", 100, 1, 10000)
		if err != nil {
			return nil, 0, err
		}
		maxBytes, err := intParam(q, "max_bytes", 1<<20, 1, 64<<20)
		if err != nil {
			return nil, 0, err
		}
		waitMS, err := intParam(q, "wait_ms", 0, 0, 60000)
		if err != nil {
			return nil, 0, err
		}
		// The answer is built whole (records, their JSON, the body):
		// max_bytes shrinks to what the memory budget has free. The
		// bytes are given back when the request ends (after the write).
		held := g.h.mem.takeUpTo(maxBytes*groupPollCost, min(maxBytes, consumeMinBytes)*groupPollCost)
		if held == 0 {
			return nil, 0, fmt.Errorf("%w: no memory left for a %d-byte poll", ErrOverloaded, maxBytes)
		}
		context.AfterFunc(r.Context(), func() { g.h.mem.give(held) })
		req := GroupPollRequest{MaxRecords: int(maxRecords), MaxBytes: int(held / groupPollCost),
			Wait: min(time.Duration(waitMS)*time.Millisecond, g.h.opts.MaxWait)}
		if req.ReadUncommitted, err = isolationParam(q); err != nil {
			return nil, 0, err
		}
		res, err := gb.PollGroup(r.Context(), name, pathParam(r, "member"), req)
		if err != nil {
			return nil, 0, err
		}
		enc := encodingParam(q.Get("encoding"))
		out := wireGroupPoll{GroupMembership: res.GroupMembership, Records: make([]wireGroupRecord, len(res.Records))}
		out.Assignment = nonNilAssignment(out.Assignment)
		for i, rec := range res.Records {
			out.Records[i] = wireGroupRecord{Topic: rec.Topic, wireConsumed: encodeRecord(rec.ConsumedRecord, enc)}
			g.h.metrics.consumed(rec.Topic, 1, recordSize(rec.Key, rec.Value, rec.Headers))
		}
		return out, http.StatusOK, nil
	})
}

// GroupMemberOffsets is the optional body of POST .../members/{member}/offsets.
type GroupMemberOffsets struct {
	Offsets []GroupOffset `json:"offsets,omitempty"`
}

func (g groupsResource) commitMember(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		var req GroupMemberOffsets
		if r.ContentLength != 0 {
			if err := decodeJSONBody(r, &req); err != nil {
				return nil, 0, err
			}
		}
		offs, err := gb.CommitMember(r.Context(), name, pathParam(r, "member"), req.Offsets)
		return groupOffsets(name, offs), http.StatusOK, err
	})
}

func (g groupsResource) leave(w http.ResponseWriter, r *http.Request) {
	g.groupCall(w, r, func(gb GroupsBackend, name string) (any, int, error) {
		return nil, http.StatusNoContent, gb.LeaveGroup(r.Context(), name, pathParam(r, "member"))
	})
}
