package kafkaproto

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

func (s *Server) incrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterResource(ctx, rr, req.ValidateOnly)
		r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func (s *Server) alterResource(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	res, err := configResource(int8(rr.ResourceType), rr.ResourceName)
	if err != nil {
		return err
	}
	ops := make([]ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		op := ConfigOpType(c.Op)
		if op < OpSet || op > OpSubtract {
			return fmt.Errorf("%w: config operation %d", ErrInvalidRequest, c.Op)
		}
		if op != OpDelete && c.Value == nil {
			return fmt.Errorf("%w: config %q has a null value", ErrInvalidConfig, c.Name)
		}
		ops = append(ops, ConfigOp{Name: c.Name, Op: op, Value: c.Value})
	}
	return s.broker.AlterConfigs(ctx, res, ops, validateOnly)
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
