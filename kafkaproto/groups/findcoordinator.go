package groups

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// FindCoordinator, key 10: versions 0-4 (flexible from 3; v4 batches keys).
// Key type 0 finds a group's coordinator, 1 a transactional id's (on a
// broker without transactions: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which
// clients do not retry); any other type is INVALID_REQUEST.
const (
	findCoordinatorKey = 10
	findCoordinatorMin = 0
	findCoordinatorMax = 4
)

func findCoordinator(env kapi.Env, ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			var err error
			c.NodeID, c.Host, c.Port, err = lookupCoordinator(env, ctx, key, req.CoordinatorType)
			c.ErrorCode, c.ErrorMessage = kapi.TxnErr(err, false), kapi.ErrMessage(err)
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	var err error
	resp.NodeID, resp.Host, resp.Port, err = lookupCoordinator(env, ctx, req.CoordinatorKey, req.CoordinatorType)
	resp.ErrorCode = kapi.TxnErr(err, false)
	if req.Version >= 1 {
		resp.ErrorMessage = kapi.ErrMessage(err)
	}
	return resp
}

// lookupCoordinator resolves a group's or transactional id's coordinator
// to its advertised address.
func lookupCoordinator(env kapi.Env, ctx context.Context, key string, keyType int8) (int32, string, int32, error) {
	var id int32
	var err error
	switch keyType {
	case 0:
		gc := coordinator(env)
		if gc == nil {
			return -1, "", -1, errNoCoordinator
		}
		id, err = gc.GroupCoordinatorID(ctx, key)
	case 1:
		tc, _ := env.Broker().(kapi.TxnCoordinator)
		if tc == nil {
			// A broker without transactions: not retriable (txn/handlers.go).
			return -1, "", -1, kapi.ErrTransactionsUnsupported
		}
		id, err = tc.TxnCoordinatorID(ctx, key)
	default:
		return -1, "", -1, fmt.Errorf("%w: coordinator type %d", kapi.ErrInvalidRequest, keyType)
	}
	if err != nil {
		return -1, "", -1, err
	}
	cl, _ := env.Broker().Cluster()
	b, ok := cl.Broker(id)
	if !ok {
		return -1, "", -1, fmt.Errorf("%w: broker %d is not available", kapi.ErrCoordinatorNotAvailable, id)
	}
	host, port, ok := env.Endpoint(ctx, b)
	if !ok {
		return -1, "", -1, fmt.Errorf("%w: broker %d has no listener of this connection's kind", kapi.ErrCoordinatorNotAvailable, id)
	}
	return b.ID, host, port, nil
}

func findCoordinatorError(req *kmsg.FindCoordinatorRequest, code int16) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode, c.NodeID, c.Port = key, code, -1, -1
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
