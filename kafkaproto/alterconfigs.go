package kafkaproto

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AlterConfigs, key 33: versions 0-2 (flexible from 2). Kafka's legacy
// (non-incremental) call: the configs named replace the resource's whole
// dynamic set, and every dynamic config not named goes back to its
// default. Topic and broker resources; validate-only checks and changes
// nothing. It is served as IncrementalAlterConfigs is (Admin.AlterConfigs):
// SET for each named config and DELETE for each other one set now.
const (
	alterConfigsKey = 33
	alterConfigsMin = 0
	alterConfigsMax = 2
)

func (s *Server) alterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.replaceConfigs(ctx, rr, req.ValidateOnly)
		r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

// replaceConfigs turns one resource's full config set into incremental
// operations against what is set now.
func (s *Server) replaceConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	res, err := configResource(int8(rr.ResourceType), rr.ResourceName)
	if err != nil {
		return err
	}
	named := make(map[string]bool, len(rr.Configs))
	ops := make([]ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		if named[c.Name] {
			return fmt.Errorf("%w: config %q named twice", ErrInvalidRequest, c.Name)
		}
		if c.Value == nil {
			return fmt.Errorf("%w: config %q has a null value", ErrInvalidConfig, c.Name)
		}
		named[c.Name] = true
		ops = append(ops, ConfigOp{Name: c.Name, Op: OpSet, Value: c.Value})
	}
	current, err := s.broker.DescribeConfigs(ctx, res)
	if err != nil {
		return err
	}
	for _, e := range current {
		dynamic := e.Source == SourceTopic || e.Source == SourceDynamicBroker
		if dynamic && !named[e.Name] {
			ops = append(ops, ConfigOp{Name: e.Name, Op: OpDelete})
		}
	}
	return s.broker.AlterConfigs(ctx, res, ops, validateOnly)
}

func alterConfigsError(req *kmsg.AlterConfigsRequest, code int16) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
