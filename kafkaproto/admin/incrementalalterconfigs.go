package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// IncrementalAlterConfigs, key 44: versions 0-1 (flexible from 1). Each
// resource's operations apply atomically.
const (
	incrementalAlterConfigsKey = 44
	incrementalAlterConfigsMin = 0
	incrementalAlterConfigsMax = 1
)

func incrementalAlterConfigs(env kapi.Env, ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		err := alterResource(env, ctx, rr, req.ValidateOnly)
		r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func alterResource(env kapi.Env, ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	res, err := configResource(int8(rr.ResourceType), rr.ResourceName)
	if err != nil {
		return err
	}
	ops := make([]kapi.ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		op := kapi.ConfigOpType(c.Op)
		if op < kapi.OpSet || op > kapi.OpSubtract {
			return fmt.Errorf("%w: config operation %d", kapi.ErrInvalidRequest, c.Op)
		}
		if op != kapi.OpDelete && c.Value == nil {
			return fmt.Errorf("%w: config %q has a null value", kapi.ErrInvalidConfig, c.Name)
		}
		ops = append(ops, kapi.ConfigOp{Name: c.Name, Op: op, Value: c.Value})
	}
	return env.Broker().AlterConfigs(ctx, res, ops, validateOnly)
}

func incrementalAlterConfigsError(req *kmsg.IncrementalAlterConfigsRequest, code int16) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
