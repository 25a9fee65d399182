package groups

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// SyncGroup, key 14: versions 0-5 (flexible from 4; v5 checks the protocol
// type and name).
const (
	syncGroupKey = 14
	syncGroupMin = 0
	syncGroupMax = 5
)

func syncGroup(env kapi.Env, ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	gc := coordinator(env)
	if gc == nil {
		return syncGroupError(req, kapi.GroupErr(errNoCoordinator))
	}
	sr := kapi.SyncRequest{
		MemberRef:    kapi.MemberRef{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation},
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment) // kept; the request aliases the read buffer
		}
	}
	res, err := gc.SyncGroup(ctx, sr)
	resp.ErrorCode = kapi.GroupErr(err)
	if err != nil {
		return resp
	}
	resp.MemberAssignment = res.Assignment
	if req.Version >= 5 {
		ptype, protocol := res.ProtocolType, res.Protocol
		resp.ProtocolType, resp.Protocol = &ptype, &protocol
	}
	return resp
}

func syncGroupError(req *kmsg.SyncGroupRequest, code int16) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	return resp
}
