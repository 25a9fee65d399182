package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// CreateAcls, key 30: versions 0-3 (flexible from 2; v0 names are literal).
// Needs alter on the cluster (kafkaproto/authz.go).
const (
	createACLsKey = 30
	createACLsMin = 0
	createACLsMax = 3
)

func createACLs(env kapi.Env, ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	admin, ok := aclAdmin(env)
	if !ok {
		return createACLsError(req, kerr.SecurityDisabled.Code)
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for _, c := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		name, principal, host := c.ResourceName, c.Principal, c.Host
		a, ok := aclFromWire(c.ResourceType, &name, c.ResourcePatternType, &principal, &host, c.Operation, c.PermissionType, req.Version)
		if !ok || a.ResourceType == "" || a.PatternType == "" || a.Operation == "" || a.Permission == "" {
			r.ErrorCode = kerr.InvalidRequest.Code
			msg := "unknown or ANY resource type, pattern type, operation or permission"
			r.ErrorMessage = &msg
		} else if err := admin.CreateACLs(ctx, []kapi.ACL{a}); err != nil {
			r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func createACLsError(req *kmsg.CreateACLsRequest, code int16) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = code
		resp.Results = append(resp.Results, r)
	}
	return resp
}
