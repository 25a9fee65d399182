package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
)

var _ api.GroupsBackend = (*httpBackend)(nil)

// groupHTTPErrors maps the coordinator's errors to the api's sentinels.
var groupHTTPErrors = []struct{ from, to error }{
	{errUnknownHTTPMember, api.ErrNotFound},
	{kafkaproto.ErrGroupIDNotFound, api.ErrUnknownGroup},
	{kafkaproto.ErrNonEmptyGroup, api.ErrConflict},
	{kafkaproto.ErrRebalanceInProgress, api.ErrConflict},
	{kafkaproto.ErrIllegalGeneration, api.ErrConflict},
	{kafkaproto.ErrFencedInstanceID, api.ErrConflict},
	{kafkaproto.ErrUnknownMemberID, api.ErrConflict},
	{kafkaproto.ErrGroupSubscribedToTopic, api.ErrConflict},
	{kafkaproto.ErrInconsistentGroupProtocol, api.ErrConflict},
	{kafkaproto.ErrInvalidGroupID, api.ErrInvalidRequest},
	{kafkaproto.ErrOffsetMetadataTooLarge, api.ErrInvalidRequest},
	{kafkaproto.ErrInvalidSessionTimeout, api.ErrInvalidRequest},
	{kafkaproto.ErrNotCoordinator, api.ErrNotLeader},
	{kafkaproto.ErrCoordinatorLoading, api.ErrNotReady},
	{kafkaproto.ErrCoordinatorNotAvailable, api.ErrNotLeader},
}

func groupHTTPError(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range groupHTTPErrors {
		if errors.Is(err, e.from) {
			return &translatedError{kind: e.to, err: err}
		}
	}
	return toHTTPError(err)
}

// group finds a group this node coordinates (requests for groups other
// nodes coordinate were proxied to them by groupsProxy). nil, nil: no such
// group (and create was false).
func (h *httpBackend) group(ctx context.Context, name string, create bool) (*group, error) {
	if h.s.groups == nil {
		return nil, fmt.Errorf("%w: this node hosts no group coordinator", api.ErrNotLeader)
	}
	g, err := h.s.groups.lookup(ctx, name, create)
	return g, groupHTTPError(err)
}

func (h *httpBackend) existingGroup(ctx context.Context, name string) (*group, error) {
	g, err := h.group(ctx, name, false)
	if err == nil && g == nil {
		err = fmt.Errorf("%w: %s", api.ErrUnknownGroup, name)
	}
	return g, err
}

func (h *httpBackend) ListGroups(ctx context.Context) ([]api.GroupSummary, error) {
	var out []api.GroupSummary
	if c := h.s.groups; c != nil {
		lags := c.cachedLags()
		for _, g := range c.snapshot() {
			g.mu.Lock()
			s := api.GroupSummary{Group: g.name, State: string(g.state), ProtocolType: g.protocolType,
				Protocol: g.protocol, Members: len(g.members), Coordinator: h.s.cfg.NodeID}
			dead := g.state == stateDead
			g.mu.Unlock()
			if !dead {
				s.Lag = c.listedLag(ctx, g, lags)
				out = append(out, s)
			}
		}
	}
	if !isForwarded(ctx) {
		// Every broker lists the groups it coordinates; ask the others.
		img, _ := h.s.meta.Image()
		for _, b := range img.Brokers {
			if b.ID == h.s.cfg.NodeID || b.State != raftfsm.BrokerAlive {
				continue
			}
			var res api.GroupList
			if err := h.s.forward.do(ctx, http.MethodGet, "http://"+nodeHost(b.ID)+"/v1/groups", nil, &res); err != nil {
				h.s.logger.Warn("list groups of broker", "broker", b.ID, "err", err)
				continue
			}
			out = append(out, res.Groups...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

func (h *httpBackend) DescribeGroup(ctx context.Context, name string) (api.GroupDetail, error) {
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
		Generation: g.generation, Leader: g.leader, Coordinator: h.s.cfg.NodeID}
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
		pl := h.s.groups.lagOf(ctx, t, offs[t].Offset)
		pl.Metadata = offs[t].Metadata
		d.Lag += pl.Lag
		byTopic[t.Topic] += pl.Lag
		d.Offsets = append(d.Offsets, pl)
	}
	h.s.metrics.setGroupLag(name, byTopic) // a fresher sample than the sampler's
	return d, nil
}

// lagOf is a committed offset's lag: records behind the partition's end,
// and the age of the record at the committed offset.
func (c *groupCoordinator) lagOf(ctx context.Context, t tp, committed int64) api.GroupPartitionLag {
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

func (h *httpBackend) DeleteGroup(ctx context.Context, name string) error {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return err
	}
	if err := g.deleteGroup(); err != nil {
		return groupHTTPError(err)
	}
	h.s.groups.remove(g)
	h.s.metrics.forgetGroupLag(name)
	return nil
}

func (h *httpBackend) GroupOffsets(ctx context.Context, name string) ([]api.GroupOffset, error) {
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

func (h *httpBackend) CommitGroupOffsets(ctx context.Context, name string, req api.GroupCommitRequest) ([]api.GroupOffset, error) {
	img, _ := h.s.meta.Image()
	co := make([]kafkaproto.CommitOffset, 0, len(req.Offsets))
	for i, o := range req.Offsets {
		t, ok := img.Topics[o.Topic]
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
	errs, err := g.commit(ref, co)
	if err != nil {
		if req.MemberID == "" {
			return nil, fmt.Errorf("%w: group %s has active members; stop them first, or commit with their member_id and generation (%v)", api.ErrConflict, name, err)
		}
		return nil, groupHTTPError(err)
	}
	return committedList(co, errs)
}

func (h *httpBackend) ResetGroupOffsets(ctx context.Context, name string, req api.GroupResetRequest) (api.GroupResetResult, error) {
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
		target, err := h.s.groups.resetTarget(ctx, t, req)
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
	if _, err := g.commit(kafkaproto.MemberRef{Group: name, Generation: -1}, co); err != nil {
		return out, fmt.Errorf("%w: %v", api.ErrConflict, err)
	}
	return out, nil
}

// resetPartitions are every partition of the named topics, or the
// partitions with committed offsets.
func (h *httpBackend) resetPartitions(topics []string, current map[tp]int64) ([]tp, error) {
	var parts []tp
	if len(topics) == 0 {
		for t := range current {
			parts = append(parts, t)
		}
	}
	img, _ := h.s.meta.Image()
	for _, name := range topics {
		t, ok := img.Topics[name]
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
func (c *groupCoordinator) resetTarget(ctx context.Context, t tp, req api.GroupResetRequest) (int64, error) {
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
		return c.offsetForTime(ctx, t, *req.Timestamp, end)
	}
	return 0, &api.FieldError{Field: "body.strategy", Err: api.ErrInvalidRequest, Msg: "must be earliest, latest, timestamp or offset"}
}

// offsetForTime is the first offset whose record is at or after ts (the
// end when there is none).
func (c *groupCoordinator) offsetForTime(ctx context.Context, t tp, ts, end int64) (int64, error) {
	img, _ := c.s.meta.Image()
	top := img.Topics[t.Topic]
	leader := top.Partitions[t.Partition].Leader
	if leader == c.s.cfg.NodeID {
		p, err := c.s.broker.partition(t.Topic, t.Partition)
		if err != nil {
			return 0, toHTTPError(err)
		}
		return p.resolveOffset(0, &ts)
	}
	if _, ok := img.Brokers[leader]; !ok {
		return 0, fmt.Errorf("%w: %s-%d has no leader", api.ErrNotLeader, t.Topic, t.Partition)
	}
	res, err := c.s.forward.consume(context.WithValue(ctx, forwardedKey{}, false), nodeHost(leader),
		api.ConsumeRequest{Topic: t.Topic, Partition: t.Partition, Timestamp: &ts, MaxRecords: 1, MaxBytes: 1})
	if err != nil {
		return 0, err
	}
	if len(res.Records) > 0 {
		return res.Records[0].Offset, nil
	}
	return min(res.NextOffset, end), nil
}

func (h *httpBackend) JoinGroup(ctx context.Context, name string, req api.GroupJoinRequest) (api.GroupMembership, error) {
	// The member's polls read these topics: Kafka's Fetch needs read on each.
	for _, t := range req.Topics {
		if p := api.PrincipalFrom(ctx); !h.s.allowed(p, "*", "topic", t, "read") {
			return api.GroupMembership{}, fmt.Errorf("%w: %s may not read topic %q (no ACL allows it)", api.ErrForbidden, p, t)
		}
	}
	g, err := h.group(ctx, name, true)
	if err != nil {
		return api.GroupMembership{}, err
	}
	ms, err := h.s.groups.joinHTTP(ctx, g, req)
	return ms, groupHTTPError(err)
}

func (h *httpBackend) PollGroup(ctx context.Context, name, member string, req api.GroupPollRequest) (api.GroupPollResult, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return api.GroupPollResult{}, err
	}
	res, err := h.s.groups.pollHTTP(ctx, g, member, req)
	return res, groupHTTPError(err)
}

func (h *httpBackend) CommitMember(ctx context.Context, name, member string, offsets []api.GroupOffset) ([]api.GroupOffset, error) {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	out, err := h.s.groups.commitHTTP(g, member, offsets)
	return out, groupHTTPError(err)
}

func (h *httpBackend) LeaveGroup(ctx context.Context, name, member string) error {
	g, err := h.existingGroup(ctx, name)
	if err != nil {
		return err
	}
	g.mu.Lock()
	_, err = g.httpMemberLocked(member)
	g.mu.Unlock()
	if err != nil {
		return groupHTTPError(err)
	}
	errs := g.leave([]kafkaproto.MemberRef{{Group: name, MemberID: member, Generation: -1}})
	return groupHTTPError(errs[0])
}

// groupsProxy sends /v1/groups/{group}... requests to the node that
// coordinates the group (one hop: a proxied request is served where it
// lands), so an HTTP member's calls may reach any node.
func (s *Server) groupsProxy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := ""
		if name, ok := groupOfPath(r.URL); ok && !isForwarded(r.Context()) {
			addr = s.groupCoordinatorHTTP(name)
		}
		if addr == "" {
			next.ServeHTTP(w, r)
			return
		}
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(&url.URL{Scheme: "http", Host: addr})
				pr.Out.Header.Set(forwardedHeader, "1")
				// Never the client's own: the coordinator trusts this one.
				pr.Out.Header.Del(api.PrincipalHeader)
				if p := api.PrincipalFrom(pr.In.Context()); p != "" {
					pr.Out.Header.Set(api.PrincipalHeader, p)
				}
			},
			Transport: s.forward.client.Transport,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				api.WriteProblem(w, r, fmt.Errorf("%w: the group's coordinator (%s) is unreachable", api.ErrNotLeader, addr))
			},
		}
		proxy.ServeHTTP(w, r)
	})
}

// groupOfPath returns the group of a /v1/groups/{group}[/...] path.
func groupOfPath(u *url.URL) (string, bool) {
	rest, ok := strings.CutPrefix(u.EscapedPath(), "/v1/groups/")
	if !ok || rest == "" {
		return "", false
	}
	seg, _, _ := strings.Cut(rest, "/")
	name, err := url.PathUnescape(seg)
	return name, err == nil && name != ""
}

// groupCoordinatorHTTP is the forwarding host of the group's coordinator
// (nodeHost: reached over the inter-node port) when it is another node
// ("" when it is this one or unknown).
func (s *Server) groupCoordinatorHTTP(group string) string {
	img, _ := s.meta.Image()
	t, ok := img.Topics[offsetsTopic]
	if !ok || len(t.Partitions) == 0 {
		return ""
	}
	leader := t.Partitions[groupPartition(group, int32(len(t.Partitions)))].Leader
	if leader < 0 || leader == s.cfg.NodeID {
		return ""
	}
	if _, ok := img.Brokers[leader]; ok {
		return nodeHost(leader)
	}
	return ""
}
