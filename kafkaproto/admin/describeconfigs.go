package admin

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeConfigs, key 32: versions 1-4 (flexible from 4). Topic, broker
// and broker logger resources; ConfigNames filters, documentation is included on
// request (v3+), synonyms too (v1+).
const (
	describeConfigsKey = 32
	describeConfigsMin = 1
	describeConfigsMax = 4
)

func describeConfigs(env kapi.Env, ctx context.Context, req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		entries, err := describeResource(env, ctx, rr)
		if err != nil {
			r.ErrorCode, r.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			r.Configs = append(r.Configs, describeConfig(e, req.IncludeDocumentation, req.IncludeSynonyms))
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func describeResource(env kapi.Env, ctx context.Context, rr kmsg.DescribeConfigsRequestResource) ([]kapi.ConfigEntry, error) {
	res, err := configResource(int8(rr.ResourceType), rr.ResourceName)
	if err != nil {
		return nil, err
	}
	return env.Broker().DescribeConfigs(ctx, res)
}

// configResource validates a resource type and name from a request.
func configResource(typ int8, name string) (kapi.ConfigResource, error) {
	switch kapi.ResourceType(typ) {
	case kapi.ResourceTopic:
		if !kapi.ValidTopicName(name) {
			return kapi.ConfigResource{}, fmt.Errorf("%w: %q", kapi.ErrInvalidTopic, name)
		}
	case kapi.ResourceBroker, kapi.ResourceBrokerLogger:
	default:
		return kapi.ConfigResource{}, fmt.Errorf("%w: config resource type %d not supported", kapi.ErrInvalidRequest, typ)
	}
	return kapi.ConfigResource{Type: kapi.ResourceType(typ), Name: name}, nil
}

func describeConfig(e kapi.ConfigEntry, doc, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.ReadOnly, c.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Sensitive
	c.IsDefault = e.Source == kapi.SourceDefault
	c.Source = kmsg.ConfigSource(e.Source)
	c.ConfigType = kmsg.ConfigType(e.Type)
	if doc && e.Doc != "" {
		c.Documentation = &e.Doc
	}
	if synonyms {
		for _, syn := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = syn.Name, syn.Value, kmsg.ConfigSource(syn.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}

func describeConfigsError(req *kmsg.DescribeConfigsRequest, code int16) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}
