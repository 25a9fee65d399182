package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

// groupsBackend adds api.GroupsBackend to the in-memory backend: committed
// offsets per group, and HTTP members that read one topic's partition 0
// through the memBackend's Consume. It checks the handler's plumbing
// (routing, parameters, shapes, errors); the real coordinator is tested in
// server/e2e_groups_test.go.
type groupsBackend struct {
	fullBackend
	mu      sync.Mutex
	offsets map[string]map[string]int64 // group -> "topic/partition" -> offset
	members map[string]string           // member id -> topic
	lastReq api.GroupPollRequest
}

func newGroupsEnv(t *testing.T) (*env, *groupsBackend) {
	var gb *groupsBackend
	e := newEnv(t, func(_ *rest.Options, m *memBackend) api.Backend {
		gb = &groupsBackend{fullBackend: fullBackend{m}, offsets: map[string]map[string]int64{}, members: map[string]string{}}
		return gb
	})
	return e, gb
}

func (g *groupsBackend) ListGroups(_ context.Context, q api.ListQuery) (api.GroupPage, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for name := range g.offsets {
		names = append(names, name)
	}
	names, more := api.PageNames(names, q)
	out := api.GroupPage{More: more}
	for _, name := range names {
		out.Groups = append(out.Groups, api.GroupSummary{Group: name, State: "Empty", Coordinator: 1})
	}
	return out, nil
}

func (g *groupsBackend) DescribeGroup(_ context.Context, name string) (api.GroupDetail, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.offsets[name]; !ok {
		return api.GroupDetail{}, fmt.Errorf("%w: %s", api.ErrUnknownGroup, name)
	}
	return api.GroupDetail{Group: name, State: "Empty", Coordinator: 1}, nil
}

func (g *groupsBackend) DeleteGroup(_ context.Context, name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) > 0 {
		return fmt.Errorf("%w: active members", api.ErrConflict)
	}
	delete(g.offsets, name)
	return nil
}

func (g *groupsBackend) GroupOffsets(_ context.Context, name string) ([]api.GroupOffset, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []api.GroupOffset
	for k, off := range g.offsets[name] {
		var topic string
		var part int32
		fmt.Sscanf(k, "%s %d", &topic, &part)
		out = append(out, api.GroupOffset{Topic: topic, Partition: part, Offset: off})
	}
	return out, nil
}

func (g *groupsBackend) CommitGroupOffsets(_ context.Context, name string, req api.GroupCommitRequest) ([]api.GroupOffset, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.offsets[name] == nil {
		g.offsets[name] = map[string]int64{}
	}
	for _, o := range req.Offsets {
		g.offsets[name][fmt.Sprintf("%s %d", o.Topic, o.Partition)] = o.Offset
	}
	return req.Offsets, nil
}

func (g *groupsBackend) ResetGroupOffsets(_ context.Context, name string, req api.GroupResetRequest) (api.GroupResetResult, error) {
	return api.GroupResetResult{DryRun: req.DryRun == nil || *req.DryRun}, nil
}

func (g *groupsBackend) JoinGroup(_ context.Context, name string, req api.GroupJoinRequest) (api.GroupMembership, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("m%d@%s", len(g.members), req.ClientHost)
	g.members[id] = req.Topics[0]
	return api.GroupMembership{Group: name, MemberID: id, Generation: 1, State: "Stable",
		Assignment: []api.TopicPartitions{{Topic: req.Topics[0], Partitions: []int32{0}}}}, nil
}

func (g *groupsBackend) PollGroup(ctx context.Context, name, member string, req api.GroupPollRequest) (api.GroupPollResult, error) {
	g.mu.Lock()
	topic, ok := g.members[member]
	g.lastReq = req
	g.mu.Unlock()
	if !ok {
		return api.GroupPollResult{}, fmt.Errorf("%w: member %s", api.ErrNotFound, member)
	}
	res, err := g.Consume(ctx, api.ConsumeRequest{Topic: topic, Offset: api.OffsetEarliest, MaxRecords: req.MaxRecords, MaxBytes: req.MaxBytes})
	out := api.GroupPollResult{GroupMembership: api.GroupMembership{Group: name, MemberID: member, Generation: 1, State: "Stable"}}
	for _, r := range res.Records {
		out.Records = append(out.Records, api.GroupRecord{Topic: topic, ConsumedRecord: r})
	}
	return out, err
}

func (g *groupsBackend) CommitMember(_ context.Context, name, member string, offsets []api.GroupOffset) ([]api.GroupOffset, error) {
	return offsets, nil
}

func (g *groupsBackend) LeaveGroup(_ context.Context, name, member string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.members, member)
	return nil
}

func TestGroupsNotImplemented(t *testing.T) {
	e := newEnv(t) // fullBackend has no GroupsBackend
	for _, path := range []string{"/v1/groups", "/v1/groups/g", "/v1/groups/g/offsets"} {
		r := e.do(http.MethodGet, path, "")
		mustStatus(t, r, http.StatusNotImplemented)
	}
}

func TestGroupsRoutes(t *testing.T) {
	e, gb := newGroupsEnv(t)
	e.createTopic("t", 1)
	e.produce("t", "?encoding=string", `{"records":[{"key":"k","value":"v1"},{"value":"v2"}]}`)

	mustStatus(t, e.do(http.MethodGet, "/v1/groups/nope", ""), http.StatusNotFound)
	r := e.do(http.MethodPost, "/v1/groups/g%2Fslash/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	mustStatus(t, r, http.StatusOK)
	var offs api.GroupOffsets
	e.do(http.MethodGet, "/v1/groups/g%2Fslash/offsets", "").json(t, &offs)
	if offs.Group != "g/slash" || len(offs.Offsets) != 1 || offs.Offsets[0].Offset != 1 {
		t.Fatalf("offsets %+v", offs)
	}
	var list api.GroupList
	e.do(http.MethodGet, "/v1/groups", "").json(t, &list)
	if len(list.Groups) != 1 || list.Groups[0].Group != "g/slash" {
		t.Fatalf("list %+v", list)
	}

	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"strategy":"timestamp"}`, "body.timestamp"},
		{`{"strategy":"offset"}`, "body.offset"},
		{`{"strategy":"sideways"}`, "body.strategy"},
		{`{"strategy":"earliest","bogus":1}`, "body"},
	} {
		r := e.do(http.MethodPost, "/v1/groups/g/offsets/reset", tc.body)
		mustStatus(t, r, http.StatusBadRequest)
		if p := r.problem(t); len(p.Field) < len(tc.field) || p.Field[:len(tc.field)] != tc.field {
			t.Errorf("%s: field %q, want %q", tc.body, p.Field, tc.field)
		}
	}
	var reset api.GroupResetResult
	e.do(http.MethodPost, "/v1/groups/g/offsets/reset", `{"strategy":"earliest"}`).json(t, &reset)
	if !reset.DryRun || reset.Group != "g" {
		t.Fatalf("reset defaults to a dry run: %+v", reset)
	}

	var m api.GroupMembership
	e.do(http.MethodPost, "/v1/groups/g/members", `{"topics":["t"]}`).json(t, &m)
	if m.MemberID == "" || m.MemberID[len(m.MemberID)-len("@127.0.0.1"):] != "@127.0.0.1" {
		t.Fatalf("member %+v: the client host is the caller's address", m)
	}
	mustStatus(t, e.do(http.MethodPost, "/v1/groups/g/members", `{"topics":[]}`), http.StatusBadRequest)
	mustStatus(t, e.do(http.MethodGet, "/v1/groups/g/members/x/records?wait_ms=60001", ""), http.StatusBadRequest)
	var poll struct {
		Records []struct {
			Topic string `json:"topic"`
			Value string `json:"value"`
		} `json:"records"`
	}
	e.do(http.MethodGet, "/v1/groups/g/members/"+m.MemberID+"/records?encoding=string&max_records=5&wait_ms=100", "").json(t, &poll)
	if len(poll.Records) != 2 || poll.Records[0].Topic != "t" || poll.Records[1].Value != "v2" {
		t.Fatalf("poll %+v", poll)
	}
	if gb.lastReq.MaxRecords != 5 || gb.lastReq.Wait != 100*time.Millisecond {
		t.Fatalf("poll request %+v", gb.lastReq)
	}
	mustStatus(t, e.do(http.MethodGet, "/v1/groups/g/members/unknown/records", ""), http.StatusNotFound)
	mustStatus(t, e.do(http.MethodPost, "/v1/groups/g/members/"+m.MemberID+"/offsets", ""), http.StatusOK)
	mustStatus(t, e.do(http.MethodDelete, "/v1/groups/g%2Fslash", ""), http.StatusConflict)
	mustStatus(t, e.do(http.MethodDelete, "/v1/groups/g/members/"+m.MemberID, ""), http.StatusNoContent)
	mustStatus(t, e.do(http.MethodDelete, "/v1/groups/g%2Fslash", ""), http.StatusNoContent)
}
