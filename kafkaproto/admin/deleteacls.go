package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DeleteAcls, key 31: versions 0-3 (flexible from 2). Needs alter on the
// cluster (kafkaproto/authz.go). Each filter deletes what it selects (MATCH refused,
// as in DescribeAcls) and lists it.
const (
	deleteACLsKey = 31
	deleteACLsMin = 0
	deleteACLsMax = 3
)

func deleteACLs(env kapi.Env, ctx context.Context, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	admin, ok := aclAdmin(env)
	if !ok {
		return deleteACLsError(req, kerr.SecurityDisabled.Code)
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for _, f := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		filter, ok := aclFromWire(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType, req.Version)
		if !ok {
			r.ErrorCode = kerr.InvalidRequest.Code
			resp.Results = append(resp.Results, r)
			continue
		}
		deleted, err := admin.DeleteACLs(ctx, filter)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		}
		for _, a := range deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = wireValue(aclResourceNames, a.ResourceType), a.ResourceName
			m.ResourcePatternType = wireValue(aclPatternNames, a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = wireValue(aclOpNames, a.Operation), wireValue(aclPermNames, a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func deleteACLsError(req *kmsg.DeleteACLsRequest, code int16) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = code
		resp.Results = append(resp.Results, r)
	}
	return resp
}
