package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups, key 42: versions 0-2 (flexible from 2). Only empty groups
// can be deleted (NON_EMPTY_GROUP otherwise).
const (
	deleteGroupsKey = 42
	deleteGroupsMin = 0
	deleteGroupsMax = 2
)

func (s *Server) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	gc := s.coordinator()
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		if gc == nil {
			rg.ErrorCode = groupErr(errNoCoordinator)
		} else {
			rg.ErrorCode = groupErr(gc.DeleteGroup(ctx, name))
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
