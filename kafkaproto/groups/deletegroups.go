package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DeleteGroups, key 42: versions 0-2 (flexible from 2). Only empty groups
// can be deleted (NON_EMPTY_GROUP otherwise).
const (
	deleteGroupsKey = 42
	deleteGroupsMin = 0
	deleteGroupsMax = 2
)

func deleteGroups(env kapi.Env, ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	gc := coordinator(env)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		if gc == nil {
			rg.ErrorCode = kapi.GroupErr(errNoCoordinator)
		} else {
			rg.ErrorCode = kapi.GroupErr(gc.DeleteGroup(ctx, name))
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func deleteGroupsError(req *kmsg.DeleteGroupsRequest, code int16) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = name, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
