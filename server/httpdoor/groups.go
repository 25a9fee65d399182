package httpdoor

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
	"github.com/runnel/runnel/server/groups"
)

// The HTTP door's group APIs: the coordinator (server/groups) answers for
// the groups this node coordinates; here the door checks ACLs, lists the
// other brokers' groups, proxies requests to a group's coordinator and
// translates errors.

var _ api.GroupsBackend = (*Door)(nil)

// groupHTTPErrors maps the coordinator's errors to the api's sentinels.
var groupHTTPErrors = []struct{ from, to error }{
	{groups.ErrUnknownMember, api.ErrNotFound},
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

// coordinator returns the coordinator's HTTP view (requests for groups
// other nodes coordinate were proxied to them by GroupsProxy).
func (h *Door) coordinator() (groups.HTTP, error) {
	c := h.cfg.Groups()
	if c == nil {
		return groups.HTTP{}, fmt.Errorf("%w: this node hosts no group coordinator", api.ErrNotLeader)
	}
	return c.HTTP(), nil
}

// ListGroups merges the pages of every alive broker (each lists the groups
// it coordinates) into one page of q.
func (h *Door) ListGroups(ctx context.Context, q api.ListQuery) (api.GroupPage, error) {
	var page api.GroupPage
	if c := h.cfg.Groups(); c != nil {
		page, _ = c.HTTP().ListGroups(ctx, q)
	}
	if !IsForwarded(ctx) {
		img, _ := h.cfg.Meta.Image()
		for _, b := range img.Brokers {
			if b.ID == h.cfg.NodeID || b.State != raftfsm.BrokerAlive {
				continue
			}
			var res api.GroupList
			if err := h.forward.do(ctx, http.MethodGet, "http://"+NodeHost(b.ID)+"/v1/groups?"+q.Values().Encode(), nil, &res); err != nil {
				h.cfg.Logger.Warn("list groups of broker", "broker", b.ID, "err", err)
				continue
			}
			page.Groups = append(page.Groups, res.Groups...)
			page.More = page.More || res.NextCursor != ""
		}
	}
	sort.Slice(page.Groups, func(i, j int) bool { return page.Groups[i].Group < page.Groups[j].Group })
	if len(page.Groups) > q.Limit {
		page.Groups, page.More = page.Groups[:q.Limit], true
	}
	return page, nil
}

func (h *Door) DescribeGroup(ctx context.Context, name string) (api.GroupDetail, error) {
	g, err := h.coordinator()
	if err != nil {
		return api.GroupDetail{}, err
	}
	d, err := g.DescribeGroup(ctx, name)
	return d, groupHTTPError(err)
}

func (h *Door) DeleteGroup(ctx context.Context, name string) error {
	g, err := h.coordinator()
	if err != nil {
		return err
	}
	return groupHTTPError(g.DeleteGroup(ctx, name))
}

func (h *Door) GroupOffsets(ctx context.Context, name string) ([]api.GroupOffset, error) {
	g, err := h.coordinator()
	if err != nil {
		return nil, err
	}
	out, err := g.GroupOffsets(ctx, name)
	return out, groupHTTPError(err)
}

func (h *Door) CommitGroupOffsets(ctx context.Context, name string, req api.GroupCommitRequest) ([]api.GroupOffset, error) {
	g, err := h.coordinator()
	if err != nil {
		return nil, err
	}
	out, err := g.CommitGroupOffsets(ctx, name, req)
	return out, groupHTTPError(err)
}

func (h *Door) ResetGroupOffsets(ctx context.Context, name string, req api.GroupResetRequest) (api.GroupResetResult, error) {
	g, err := h.coordinator()
	if err != nil {
		return api.GroupResetResult{Group: name, DryRun: req.DryRun == nil || *req.DryRun}, err
	}
	out, err := g.ResetGroupOffsets(ctx, name, req)
	return out, groupHTTPError(err)
}

func (h *Door) JoinGroup(ctx context.Context, name string, req api.GroupJoinRequest) (api.GroupMembership, error) {
	// The member's polls read these topics: Kafka's Fetch needs read on each.
	for _, t := range req.Topics {
		if p := api.PrincipalFrom(ctx); !h.allowed(p, "*", "topic", t, "read") {
			return api.GroupMembership{}, fmt.Errorf("%w: %s may not read topic %q (no ACL allows it)", api.ErrForbidden, p, t)
		}
	}
	g, err := h.coordinator()
	if err != nil {
		return api.GroupMembership{}, err
	}
	ms, err := g.JoinGroup(ctx, name, req)
	return ms, groupHTTPError(err)
}

func (h *Door) PollGroup(ctx context.Context, name, member string, req api.GroupPollRequest) (api.GroupPollResult, error) {
	g, err := h.coordinator()
	if err != nil {
		return api.GroupPollResult{}, err
	}
	res, err := g.PollGroup(ctx, name, member, req)
	return res, groupHTTPError(err)
}

func (h *Door) CommitMember(ctx context.Context, name, member string, offsets []api.GroupOffset) ([]api.GroupOffset, error) {
	g, err := h.coordinator()
	if err != nil {
		return nil, err
	}
	out, err := g.CommitMember(ctx, name, member, offsets)
	return out, groupHTTPError(err)
}

func (h *Door) LeaveGroup(ctx context.Context, name, member string) error {
	g, err := h.coordinator()
	if err != nil {
		return err
	}
	return groupHTTPError(g.LeaveGroup(ctx, name, member))
}

// GroupsProxy sends /v1/groups/{group}... requests to the node that
// coordinates the group (one hop: a proxied request is served where it
// lands), so an HTTP member's calls may reach any node.
func (h *Door) GroupsProxy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := ""
		if name, ok := groupOfPath(r.URL); ok && !IsForwarded(r.Context()) {
			addr = h.groupCoordinatorHTTP(name)
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
			Transport: h.forward.client.Transport,
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
func (h *Door) groupCoordinatorHTTP(group string) string {
	img, _ := h.cfg.Meta.Image()
	t, ok := img.Topics.Lookup(groups.OffsetsTopic)
	if !ok || len(t.Partitions) == 0 {
		return ""
	}
	leader := t.Partitions[groups.Partition(group, int32(len(t.Partitions)))].Leader
	if leader < 0 || leader == h.cfg.NodeID {
		return ""
	}
	if _, ok := img.Brokers[leader]; ok {
		return NodeHost(leader)
	}
	return ""
}
