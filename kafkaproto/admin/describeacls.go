package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeAcls, key 29: versions 0-3 (flexible from 2). Needs describe on
// the cluster (kafkaproto/authz.go). The MATCH pattern filter is refused
// (INVALID_REQUEST): ANY, LITERAL and PREFIXED select by equality.
const (
	describeACLsKey = 29
	describeACLsMin = 0
	describeACLsMax = 3
)

func describeACLs(env kapi.Env, ctx context.Context, req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	admin, ok := aclAdmin(env)
	if !ok {
		return describeACLsError(req, kerr.SecurityDisabled.Code)
	}
	f, ok := aclFromWire(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType, req.Version)
	if !ok {
		return describeACLsError(req, kerr.InvalidRequest.Code)
	}
	acls, err := admin.DescribeACLs(ctx, f)
	if err != nil {
		resp := describeACLsError(req, kapi.KafkaErr(err))
		resp.ErrorMessage = kapi.ErrMessage(err)
		return resp
	}
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	byResource := map[[3]string]int{}
	for _, a := range acls {
		key := [3]string{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := byResource[key]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = wireValue(aclResourceNames, a.ResourceType)
			r.ResourceName = a.ResourceName
			r.ResourcePatternType = wireValue(aclPatternNames, a.PatternType)
			i = len(resp.Resources)
			byResource[key] = i
			resp.Resources = append(resp.Resources, r)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = wireValue(aclOpNames, a.Operation), wireValue(aclPermNames, a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return resp
}

func describeACLsError(req *kmsg.DescribeACLsRequest, code int16) *kmsg.DescribeACLsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = code
	return resp
}
