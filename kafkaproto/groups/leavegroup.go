package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// LeaveGroup, key 13: versions 0-5 (flexible from 4). v0-2 name one member;
// v3+ a batch of members, each by member id or group instance id.
const (
	leaveGroupKey = 13
	leaveGroupMin = 0
	leaveGroupMax = 5
)

func leaveGroup(env kapi.Env, ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	gc := coordinator(env)
	if gc == nil {
		return leaveGroupError(req, kapi.GroupErr(errNoCoordinator))
	}
	var refs []kapi.MemberRef
	if req.Version < 3 {
		refs = []kapi.MemberRef{{Group: req.Group, MemberID: req.MemberID, Generation: -1}}
	}
	for _, m := range req.Members {
		ref := kapi.MemberRef{Group: req.Group, MemberID: m.MemberID, InstanceID: m.InstanceID, Generation: -1}
		if m.Reason != nil {
			ref.Reason = *m.Reason
		}
		refs = append(refs, ref)
	}
	errs, err := gc.LeaveGroup(ctx, req.Group, refs)
	if err != nil {
		return leaveGroupError(req, kapi.GroupErr(err))
	}
	if req.Version < 3 {
		if len(errs) > 0 {
			resp.ErrorCode = kapi.GroupErr(errs[0])
		}
		return resp
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		if i < len(errs) {
			rm.ErrorCode = kapi.GroupErr(errs[i])
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func leaveGroupError(req *kmsg.LeaveGroupRequest, code int16) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = code
	return resp
}
