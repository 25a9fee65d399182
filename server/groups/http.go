package groups

import (
	"context"
	"errors"
	"fmt"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
)

// HTTP is the coordinator as the HTTP door calls it: api.GroupsBackend's
// methods for the groups this node coordinates (the door proxies requests
// for other groups to their coordinator, lists the other brokers' groups,
// checks ACLs and translates errors).
type HTTP struct{ c *Coordinator }

// HTTP returns the coordinator's HTTP view.
func (c *Coordinator) HTTP() HTTP { return HTTP{c} }

// group finds a group this node coordinates. nil, nil: no such group (and
// create was false).
func (h HTTP) group(ctx context.Context, name string, create bool) (*group, error) {
	return h.c.lookup(ctx, name, create)
}

func (h HTTP) existingGroup(ctx context.Context, name string) (*group, error) {
	g, err := h.group(ctx, name, false)
	if err == nil && g == nil {
		err = fmt.Errorf("%w: %s", api.ErrUnknownGroup, name)
	}
	return g, err
}

// ListGroups lists one page of the groups coordinated here (see
// api.ListQuery); lag is computed for the page only.
func (h HTTP) ListGroups(ctx context.Context, q api.ListQuery) (api.GroupPage, error) {
	c := h.c
	var page api.GroupPage
	lags := c.cachedLags()
	for _, g := range c.snapshot() { // ordered by name
		if !q.Match(g.name) {
			continue
		}
		g.mu.Lock()
		s := api.GroupSummary{Group: g.name, State: string(g.state), ProtocolType: g.protocolType,
			Protocol: g.protocol, Members: len(g.members), Coordinator: c.cfg.NodeID}
		dead := g.state == stateDead
		g.mu.Unlock()
		if dead {
			continue
		}
		if len(page.Groups) == q.Limit {
			page.More = true
			break
		}
		s.Lag = c.listedLag(ctx, g, lags)
		page.Groups = append(page.Groups, s)
	}
	return page, nil
}

func (h HTTP) DescribeGroup(ctx context.Context, name string) (api.GroupDetail, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return api.GroupDetail{}, err
	}
	g.mu.Lock()
	if g.state == stateDead {
		g.mu.Unlock()
		return api.GroupDetail{}, fmt.Errorf("%w: %s", api.ErrUnknownGroup, name)
	}
	d := api.GroupDetail{Group: g.name, State: string(g.state), ProtocolType: g.protocolType, Protocol: g.protocol,
		Generation: g.generation, Leader: g.leader, Coordinator: h.c.cfg.NodeID}
	for _, id := range g.sortedMemberIDsLocked() {
		m := g.members[id]
		md := api.GroupMemberDetail{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.host, Kind: "kafka"}
		if m.http != nil {
			md.Kind = "http"
		}
		if g.state == stateStable && g.protocolType == "consumer" {
			for _, a := range decodeAssignment(m.assignment) {
				md.Assignment = append(md.Assignment, api.TopicPartitions{Topic: a.Topic, Partitions: a.Partitions})
			}
		}
		d.Members = append(d.Members, md)
	}
	offs := make(map[tp]offsetEntry, len(g.offsets))
	for t, e := range g.offsets {
		offs[t] = e
	}
	g.mu.Unlock()
	parts := make([]tp, 0, len(offs))
	for t := range offs {
		parts = append(parts, t)
	}
	sortTPs(parts)
	byTopic := map[string]int64{}
	for _, t := range parts {
		pl := h.c.lagOf(ctx, t, offs[t].Offset)
		pl.Metadata = offs[t].Metadata
		d.Lag += pl.Lag
		byTopic[t.Topic] += pl.Lag
		d.Offsets = append(d.Offsets, pl)
	}
	h.c.b.SetGroupLag(name, byTopic) // a fresher sample than the sampler's
	return d, nil
}

// lagOf is a committed offset's lag: records behind the partition's end,
// and the age of the record at the committed offset.
func (c *Coordinator) lagOf(ctx context.Context, t tp, committed int64) api.GroupPartitionLag {
	pl := api.GroupPartitionLag{Topic: t.Topic, Partition: t.Partition, CommittedOffset: committed, EndOffset: -1}
	res, err := c.read(ctx, t, committed, 1, 1<<20)
	if errors.Is(err, api.ErrOffsetOutOfRange) {
		res, err = c.read(ctx, t, api.OffsetLatest, 1, 1)
	}
	if err != nil {
		return pl
	}
	pl.EndOffset = res.HighWatermark
	pl.Lag = max(0, res.HighWatermark-committed)
	var ms int64
	if pl.Lag > 0 && len(res.Records) > 0 {
		ms = max(0, c.now().Sub(res.Records[0].Timestamp).Milliseconds())
	}
	if pl.Lag == 0 || len(res.Records) > 0 {
		pl.LagMS = &ms
	}
	return pl
}

func (h HTTP) DeleteGroup(ctx context.Context, name string) error {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return err
	}
	return h.c.deleteGroup(g)
}

func (h HTTP) GroupOffsets(ctx context.Context, name string) ([]api.GroupOffset, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []api.GroupOffset
	for _, o := range g.fetchOffsets(nil) {
		out = append(out, api.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
	}
	return out, nil
}

func (h HTTP) CommitGroupOffsets(ctx context.Context, name string, req api.GroupCommitRequest) ([]api.GroupOffset, error) {
	img, _ := h.c.b.Image()
	co := make([]kafkaproto.CommitOffset, 0, len(req.Offsets))
	for i, o := range req.Offsets {
		t, ok := img.Topics.Lookup(o.Topic)
		if !ok || o.Partition < 0 || int(o.Partition) >= len(t.Partitions) {
			return nil, fmt.Errorf("%w: offsets[%d]: %s-%d", api.ErrUnknownPartition, i, o.Topic, o.Partition)
		}
		co = append(co, kafkaproto.CommitOffset{TopicPartition: tp{Topic: o.Topic, Partition: o.Partition},
			Offset: o.Offset, LeaderEpoch: -1, Metadata: o.Metadata})
	}
	g, err := h.group(ctx, name, true)
	if err != nil {
		return nil, err
	}
	ref := kafkaproto.MemberRef{Group: name, MemberID: req.MemberID, Generation: -1}
	if req.Generation != nil {
		ref.Generation = *req.Generation
	}
	errs, err := g.commit(ctx, ref, co)
	if err != nil {
		if req.MemberID == "" {
			return nil, fmt.Errorf("%w: group %s has active members; stop them first, or commit with their member_id and generation (%v)", api.ErrConflict, name, err)
		}
		return nil, err
	}
	return committedList(co, errs)
}

func (h HTTP) ResetGroupOffsets(ctx context.Context, name string, req api.GroupResetRequest) (api.GroupResetResult, error) {
	dry := req.DryRun == nil || *req.DryRun
	out := api.GroupResetResult{Group: name, DryRun: dry}
	g, err := h.group(ctx, name, len(req.Topics) > 0)
	if err != nil {
		return out, err
	}
	if g == nil {
		return out, fmt.Errorf("%w: %s (name topics to reset a group with no offsets)", api.ErrUnknownGroup, name)
	}
	g.mu.Lock()
	active, state := len(g.members), g.state
	current := make(map[tp]int64, len(g.offsets))
	for t, e := range g.offsets {
		current[t] = e.Offset
	}
	g.mu.Unlock()
	if active > 0 || state != stateEmpty {
		return out, fmt.Errorf("%w: group %s is %s with %d members; offsets can only be reset while it is empty", api.ErrConflict, name, state, active)
	}
	parts, err := h.resetPartitions(req.Topics, current)
	if err != nil {
		return out, err
	}
	var co []kafkaproto.CommitOffset
	for _, t := range parts {
		target, err := h.c.resetTarget(ctx, t, req)
		if err != nil {
			return out, err
		}
		cur, ok := current[t]
		if !ok {
			cur = -1
		}
		out.Offsets = append(out.Offsets, api.PlannedOffset{Topic: t.Topic, Partition: t.Partition, CurrentOffset: cur, NewOffset: target})
		co = append(co, kafkaproto.CommitOffset{TopicPartition: t, Offset: target, LeaderEpoch: -1})
	}
	if dry || len(co) == 0 {
		return out, nil
	}
	if _, err := g.commit(ctx, kafkaproto.MemberRef{Group: name, Generation: -1}, co); err != nil {
		return out, fmt.Errorf("%w: %v", api.ErrConflict, err)
	}
	return out, nil
}

// resetPartitions are every partition of the named topics, or the
// partitions with committed offsets.
func (h HTTP) resetPartitions(topics []string, current map[tp]int64) ([]tp, error) {
	var parts []tp
	if len(topics) == 0 {
		for t := range current {
			parts = append(parts, t)
		}
	}
	img, _ := h.c.b.Image()
	for _, name := range topics {
		t, ok := img.Topics.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", api.ErrUnknownTopic, name)
		}
		for i := range t.Partitions {
			parts = append(parts, tp{Topic: name, Partition: int32(i)})
		}
	}
	sortTPs(parts)
	return parts, nil
}

// resetTarget resolves a reset strategy for one partition, clamped to the
// partition's [log start, high watermark].
func (c *Coordinator) resetTarget(ctx context.Context, t tp, req api.GroupResetRequest) (int64, error) {
	res, err := c.read(ctx, t, api.OffsetLatest, 1, 1)
	if err != nil {
		return 0, err
	}
	start, end := res.StartOffset, res.HighWatermark
	switch req.Strategy {
	case api.ResetEarliest:
		return start, nil
	case api.ResetLatest:
		return end, nil
	case api.ResetOffset:
		return min(max(*req.Offset, start), end), nil
	case api.ResetTimestamp:
		return c.b.OffsetForTime(ctx, t, *req.Timestamp, end)
	}
	return 0, &api.FieldError{Field: "body.strategy", Err: api.ErrInvalidRequest, Msg: "must be earliest, latest, timestamp or offset"}
}

// JoinGroup adds an HTTP member (the door checked its ACLs).
func (h HTTP) JoinGroup(ctx context.Context, name string, req api.GroupJoinRequest) (api.GroupMembership, error) {
	g, err := h.group(ctx, name, true)
	if err != nil {
		return api.GroupMembership{}, err
	}
	return h.c.joinHTTP(ctx, g, req)
}

func (h HTTP) PollGroup(ctx context.Context, name, member string, req api.GroupPollRequest) (api.GroupPollResult, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return api.GroupPollResult{}, err
	}
	return h.c.pollHTTP(ctx, g, member, req)
}

func (h HTTP) CommitMember(ctx context.Context, name, member string, offsets []api.GroupOffset) ([]api.GroupOffset, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	return h.c.commitHTTP(ctx, g, member, offsets)
}

func (h HTTP) LeaveGroup(ctx context.Context, name, member string) error {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return err
	}
	g.mu.Lock()
	_, err = g.httpMemberLocked(member)
	g.mu.Unlock()
	if err != nil {
		return err
	}
	errs := g.leave([]kafkaproto.MemberRef{{Group: name, MemberID: member, Generation: -1}})
	return errs[0]
}
