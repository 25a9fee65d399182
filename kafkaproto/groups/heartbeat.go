package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Heartbeat, key 12: versions 0-4 (flexible from 4).
const (
	heartbeatKey = 12
	heartbeatMin = 0
	heartbeatMax = 4
)

func heartbeat(env kapi.Env, ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	gc := coordinator(env)
	if gc == nil {
		return heartbeatError(req, kapi.GroupErr(errNoCoordinator))
	}
	err := gc.Heartbeat(ctx, kapi.MemberRef{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation})
	return heartbeatError(req, kapi.GroupErr(err))
}

func heartbeatError(req *kmsg.HeartbeatRequest, code int16) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
