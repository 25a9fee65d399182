package groups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
)

// HTTP members take part in the classic protocol through the coordinator:
// it joins (and rejoins at every rebalance) on their behalf with a
// consumer-protocol subscription of their topics for every common
// assignor, so a Kafka leader assigns them partitions like any member; a
// group of HTTP members only is assigned by the coordinator (range). Their
// positions live here, on the coordinator; polls read the assigned
// partitions from them and count as heartbeats.

const (
	httpMemberSessionTimeout = 30 * time.Second
	httpPollStep             = 50 * time.Millisecond
)

// httpAssignors are the protocols an HTTP member offers, range preferred.
var httpAssignors = []string{"range", "roundrobin", "sticky", "cooperative-sticky"}

// httpMember is the coordinator-side state of an HTTP consumer. Guarded by
// its group's mu.
type httpMember struct {
	topics    []string
	reset     string // earliest or latest: where to start without a committed offset
	parts     []tp   // current assignment
	positions map[tp]int64
	next      int // partition to read first on the next poll (round robin)
}

func newHTTPMember(topics []string, reset string) *httpMember {
	ts := append([]string(nil), topics...)
	sort.Strings(ts)
	if reset != api.ResetLatest {
		reset = api.ResetEarliest
	}
	return &httpMember{topics: ts, reset: reset, positions: map[tp]int64{}}
}

// protocols is the member's subscription, owning its current assignment.
func (h *httpMember) protocols(m *member) []kafkaproto.GroupProtocol {
	meta := encodeSubscription(h.topics, decodeAssignment(m.assignment))
	out := make([]kafkaproto.GroupProtocol, len(httpAssignors))
	for i, name := range httpAssignors {
		out[i] = kafkaproto.GroupProtocol{Name: name, Metadata: meta}
	}
	return out
}

// assigned installs a new assignment; positions of kept partitions stay.
// It reports whether partitions were taken away.
func (h *httpMember) assigned(m *member, _ int32) bool {
	var parts []tp
	now := map[tp]bool{}
	keep := map[tp]int64{}
	for _, a := range decodeAssignment(m.assignment) {
		for _, p := range a.Partitions {
			t := tp{Topic: a.Topic, Partition: p}
			parts = append(parts, t)
			now[t] = true
			if pos, ok := h.positions[t]; ok {
				keep[t] = pos
			}
		}
	}
	revoked := false
	for _, t := range h.parts {
		revoked = revoked || !now[t]
	}
	h.parts, h.positions, h.next = parts, keep, 0
	return revoked
}

func (g *group) membershipLocked(m *member) api.GroupMembership {
	ms := api.GroupMembership{Group: g.name, MemberID: m.id, Generation: g.generation, State: string(g.state),
		Rebalancing: g.state != stateStable, Assignment: []api.TopicPartitions{}}
	if g.state == stateStable {
		for _, a := range decodeAssignment(m.assignment) {
			ms.Assignment = append(ms.Assignment, api.TopicPartitions{Topic: a.Topic, Partitions: a.Partitions})
		}
	}
	return ms
}

// ErrUnknownMember: no HTTP member with that id (it left, or its session
// expired).
var ErrUnknownMember = fmt.Errorf("%w: no such member", api.ErrNotFound)

// httpMemberLocked returns an HTTP member of the group.
func (g *group) httpMemberLocked(id string) (*member, error) {
	m, ok := g.members[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a member of group %s (it left, or its session expired)", ErrUnknownMember, id, g.name)
	}
	if m.http == nil {
		return nil, fmt.Errorf("%w: %q is a Kafka member", api.ErrConflict, id)
	}
	return m, nil
}

// joinHTTP adds an HTTP member and waits (up to the session timeout) for
// the group to settle with it.
func (c *Coordinator) joinHTTP(ctx context.Context, g *group, req api.GroupJoinRequest) (api.GroupMembership, error) {
	if len(req.Topics) == 0 {
		return api.GroupMembership{}, fmt.Errorf("%w: topics: at least one", api.ErrInvalidRequest)
	}
	img, _ := c.b.Image()
	for _, t := range req.Topics {
		if _, ok := img.Topics.Lookup(t); !ok {
			return api.GroupMembership{}, fmt.Errorf("%w: %s", api.ErrUnknownTopic, t)
		}
	}
	session := time.Duration(req.SessionTimeoutMS) * time.Millisecond
	if session == 0 {
		session = httpMemberSessionTimeout
	}
	hm := newHTTPMember(req.Topics, req.AutoOffsetReset)
	m := &member{assignment: nil}
	jr := kafkaproto.JoinRequest{MemberRef: kafkaproto.MemberRef{Group: g.name, Generation: -1},
		ClientID: req.ClientID, ClientHost: req.ClientHost, SessionTimeout: int32(session.Milliseconds()),
		RebalanceTimeout: int32(session.Milliseconds()), ProtocolType: "consumer", Protocols: hm.protocols(m)}
	if jr.ClientID == "" {
		jr.ClientID = "http"
	}
	res, err := g.join(ctx, jr, hm)
	if err != nil {
		return api.GroupMembership{}, err
	}
	wait := time.NewTimer(session)
	defer wait.Stop()
	for {
		g.mu.Lock()
		m, err := g.httpMemberLocked(res.MemberID)
		if err != nil {
			g.mu.Unlock()
			return api.GroupMembership{}, err
		}
		ms, changed := g.membershipLocked(m), g.changed
		g.mu.Unlock()
		if !ms.Rebalancing {
			return ms, nil
		}
		select {
		case <-changed:
		case <-wait.C:
			return ms, nil
		case <-ctx.Done():
			return ms, ctx.Err()
		}
	}
}

// pollHTTP reads records for an HTTP member from its positions.
func (c *Coordinator) pollHTTP(ctx context.Context, g *group, id string, req api.GroupPollRequest) (api.GroupPollResult, error) {
	deadline := c.now().Add(req.Wait)
	for {
		g.mu.Lock()
		m, err := g.httpMemberLocked(id)
		if err != nil {
			g.mu.Unlock()
			return api.GroupPollResult{}, err
		}
		m.deadline = c.now().Add(m.sessionTimeout)
		ms, changed, gen := g.membershipLocked(m), g.changed, g.generation
		plan := g.pollPlanLocked(m)
		g.mu.Unlock()

		var res api.GroupPollResult
		res.GroupMembership = ms
		if !ms.Rebalancing {
			recs, next, err := c.readPlan(ctx, plan, req)
			if err != nil {
				return res, err
			}
			g.mu.Lock()
			if g.generation == gen && g.state == stateStable && g.members[id] == m {
				for t, off := range next {
					m.http.positions[t] = off
				}
				if len(m.http.parts) > 0 {
					m.http.next = (m.http.next + 1) % len(m.http.parts)
				}
				res.Records = recs
			}
			g.mu.Unlock()
		}
		remaining := deadline.Sub(c.now())
		if len(res.Records) > 0 || remaining <= 0 {
			return res, nil
		}
		step := time.NewTimer(min(remaining, httpPollStep))
		select {
		case <-changed:
		case <-step.C:
		case <-ctx.Done():
			step.Stop()
			return res, nil
		}
		step.Stop()
	}
}

// pollStart is where a poll reads one partition: a position, or (from) a
// committed offset, or the reset policy.
type pollStart struct {
	t      tp
	offset int64 // api.OffsetEarliest / api.OffsetLatest when resolved by policy
}

func (g *group) pollPlanLocked(m *member) []pollStart {
	h := m.http
	out := make([]pollStart, 0, len(h.parts))
	for i := range h.parts {
		t := h.parts[(h.next+i)%len(h.parts)]
		if pos, ok := h.positions[t]; ok {
			out = append(out, pollStart{t, pos})
		} else if e, ok := g.offsets[t]; ok {
			out = append(out, pollStart{t, e.Offset})
		} else {
			out = append(out, pollStart{t, h.resetOffset()})
		}
	}
	return out
}

func (h *httpMember) resetOffset() int64 {
	if h.reset == api.ResetLatest {
		return api.OffsetLatest
	}
	return api.OffsetEarliest
}

// readPlan reads the planned partitions in order until the limits are met;
// next holds the position reached in every partition read.
func (c *Coordinator) readPlan(ctx context.Context, plan []pollStart, req api.GroupPollRequest) ([]api.GroupRecord, map[tp]int64, error) {
	var recs []api.GroupRecord
	next := map[tp]int64{}
	bytes := 0
	for _, ps := range plan {
		if len(recs) >= req.MaxRecords || bytes >= req.MaxBytes {
			break
		}
		res, err := c.readIso(ctx, ps.t, ps.offset, req.MaxRecords-len(recs), req.MaxBytes-bytes, req.ReadUncommitted)
		if errors.Is(err, api.ErrOffsetOutOfRange) {
			// The position fell out of the log (retention): start over by policy.
			res, err = c.readIso(ctx, ps.t, api.OffsetEarliest, req.MaxRecords-len(recs), req.MaxBytes-bytes, req.ReadUncommitted)
		}
		if errors.Is(err, api.ErrCorruptBatch) && len(recs) > 0 {
			break // answer what was read; the bad batch comes first at a later poll
		}
		if err != nil {
			return nil, nil, err
		}
		next[ps.t] = res.NextOffset
		n := 0
		for _, r := range res.Records {
			recs = append(recs, api.GroupRecord{Topic: ps.t.Topic, ConsumedRecord: r})
			bytes += len(r.Key) + len(r.Value)
			n += len(r.Key) + len(r.Value)
		}
		c.b.Consumed(ps.t.Topic, len(res.Records), n)
	}
	return recs, next, nil
}

// read reads one partition wherever its leader is.
func (c *Coordinator) read(ctx context.Context, t tp, offset int64, maxRecords, maxBytes int) (api.ConsumeResult, error) {
	return c.b.Read(ctx, t, offset, maxRecords, maxBytes, false)
}

// readIso is read at the poll's isolation level.
func (c *Coordinator) readIso(ctx context.Context, t tp, offset int64, maxRecords, maxBytes int, uncommitted bool) (api.ConsumeResult, error) {
	return c.b.Read(ctx, t, offset, maxRecords, maxBytes, uncommitted)
}

// commitHTTP commits offsets for an HTTP member (nil: its positions).
func (c *Coordinator) commitHTTP(ctx context.Context, g *group, id string, offsets []api.GroupOffset) ([]api.GroupOffset, error) {
	g.mu.Lock()
	m, err := g.httpMemberLocked(id)
	if err != nil {
		g.mu.Unlock()
		return nil, err
	}
	m.deadline = c.now().Add(m.sessionTimeout)
	var co []kafkaproto.CommitOffset
	if offsets == nil {
		for _, t := range m.http.parts {
			if pos, ok := m.http.positions[t]; ok {
				co = append(co, kafkaproto.CommitOffset{TopicPartition: t, Offset: pos, LeaderEpoch: -1})
			}
		}
	}
	for _, o := range offsets {
		co = append(co, kafkaproto.CommitOffset{TopicPartition: tp{Topic: o.Topic, Partition: o.Partition},
			Offset: o.Offset, LeaderEpoch: -1, Metadata: o.Metadata})
	}
	ref := kafkaproto.MemberRef{Group: g.name, MemberID: id, Generation: g.generation}
	g.mu.Unlock()
	errs, err := g.commit(ctx, ref, co)
	if err != nil {
		return nil, err
	}
	if offsets != nil {
		g.seekHTTP(id, ref.Generation, co, errs)
	}
	return committedList(co, errs)
}

// seekHTTP moves an HTTP member's positions to the offsets it committed
// explicitly on partitions it is assigned: an HTTP member has no seek of
// its own, and this is how it moves past a corrupt batch (the problem's
// next_offset) or goes back to re-read.
func (g *group) seekHTTP(id string, generation int32, co []kafkaproto.CommitOffset, errs []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.httpMemberLocked(id)
	if err != nil || g.generation != generation {
		return
	}
	for i, o := range co {
		if (i < len(errs) && errs[i] != nil) || !slices.Contains(m.http.parts, o.TopicPartition) {
			continue
		}
		m.http.positions[o.TopicPartition] = o.Offset
	}
}

func committedList(co []kafkaproto.CommitOffset, errs []error) ([]api.GroupOffset, error) {
	out := make([]api.GroupOffset, 0, len(co))
	var bad []string
	for i, o := range co {
		if i < len(errs) && errs[i] != nil {
			bad = append(bad, fmt.Sprintf("%s-%d: %v", o.Topic, o.Partition, errs[i]))
			continue
		}
		out = append(out, api.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %s", api.ErrInvalidRequest, strings.Join(bad, "; "))
	}
	return out, nil
}
