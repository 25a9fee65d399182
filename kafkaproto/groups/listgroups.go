package groups

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ListGroups, key 16: versions 0-4 (flexible from 3; v4 filters by state).
const (
	listGroupsKey = 16
	listGroupsMin = 0
	listGroupsMax = 4
)

func listGroups(env kapi.Env, ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	gc := coordinator(env)
	if gc == nil {
		return resp // no coordinator, no groups
	}
	groups, err := gc.ListGroups(ctx)
	if err != nil {
		return listGroupsError(req, kapi.GroupErr(err))
	}
	for _, g := range groups {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(st string) bool { return strings.EqualFold(st, g.State) }) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = g.Group, g.ProtocolType, g.State
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func listGroupsError(req *kmsg.ListGroupsRequest, code int16) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.ErrorCode = code
	return resp
}
