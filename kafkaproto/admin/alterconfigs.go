package admin

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

func alterConfigs(env kapi.Env, ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		err := replaceConfigs(env, ctx, rr, req.ValidateOnly)
		r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

// replaceConfigs turns one resource's full config set into incremental
// operations against what is set now.
func replaceConfigs(env kapi.Env, ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	res, err := configResource(int8(rr.ResourceType), rr.ResourceName)
	if err != nil {
		return err
	}
	named := make(map[string]bool, len(rr.Configs))
	ops := make([]kapi.ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		if named[c.Name] {
			return fmt.Errorf("%w: config %q named twice", kapi.ErrInvalidRequest, c.Name)
		}
		if c.Value == nil {
			return fmt.Errorf("%w: config %q has a null value", kapi.ErrInvalidConfig, c.Name)
		}
		named[c.Name] = true
		ops = append(ops, kapi.ConfigOp{Name: c.Name, Op: kapi.OpSet, Value: c.Value})
	}
	current, err := env.Broker().DescribeConfigs(ctx, res)
	if err != nil {
		return err
	}
	for _, e := range current {
		dynamic := e.Source == kapi.SourceTopic || e.Source == kapi.SourceDynamicBroker
		if dynamic && !named[e.Name] {
			ops = append(ops, kapi.ConfigOp{Name: e.Name, Op: kapi.OpDelete})
		}
	}
	return env.Broker().AlterConfigs(ctx, res, ops, validateOnly)
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
