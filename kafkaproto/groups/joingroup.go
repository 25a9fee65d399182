package groups

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// JoinGroup, key 11: versions 0-9 (flexible from 6). v4+ requires a known
// member id (MEMBER_ID_REQUIRED hands out one), v5+ static membership.
const (
	joinGroupKey = 11
	joinGroupMin = 0
	joinGroupMax = 9
)

func joinGroup(env kapi.Env, ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	gc := coordinator(env)
	if gc == nil {
		return joinGroupError(req, kapi.GroupErr(errNoCoordinator))
	}
	client := kapi.ClientOf(ctx)
	jr := kapi.JoinRequest{
		MemberRef:            kapi.MemberRef{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: -1},
		ClientID:             client.ID,
		ClientHost:           client.Host,
		SessionTimeout:       req.SessionTimeoutMillis,
		RebalanceTimeout:     req.RebalanceTimeoutMillis,
		ProtocolType:         req.ProtocolType,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = req.SessionTimeoutMillis
	}
	if req.Reason != nil {
		jr.Reason = *req.Reason
	}
	for _, p := range req.Protocols {
		// Request bytes alias the connection's read buffer; the
		// coordinator keeps these.
		jr.Protocols = append(jr.Protocols, kapi.GroupProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	res, err := gc.JoinGroup(ctx, jr)
	resp.ErrorCode = kapi.GroupErr(err)
	resp.MemberID = res.MemberID
	if err != nil {
		resp.Generation = -1
		if resp.MemberID == "" {
			resp.MemberID = req.MemberID
		}
		return resp
	}
	resp.Generation, resp.LeaderID = res.Generation, res.LeaderID
	protocol, ptype := res.Protocol, res.ProtocolType
	resp.Protocol = &protocol
	if req.Version >= 7 {
		resp.ProtocolType = &ptype
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func joinGroupError(req *kmsg.JoinGroupRequest, code int16) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
	return resp
}
