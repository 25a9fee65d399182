package admin

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ListConfigResources, key 74: versions 0-1 (flexible; KIP-1142, which
// renamed ListClientMetricsResources). The resources that have configs: v0
// asks for client-metrics subscriptions only (runnel has none: an empty
// list); v1 names the resource types, none meaning every type this broker
// has: topics (by name) and brokers (by id). Groups and client metrics have
// no configs here, so asking for them lists nothing; an unknown type is
// INVALID_REQUEST. Needs DescribeConfigs on the cluster. The list is not
// filtered by the caller's topic ACLs: like Kafka, the cluster permission
// covers it.
const (
	listConfigResourcesKey = 74
	listConfigResourcesMin = 0
	listConfigResourcesMax = 1
)

// Config resource types of ListConfigResources (Kafka's ConfigResource.Type).
const (
	configResourceTopic         int8 = 2
	configResourceBroker        int8 = 4
	configResourceBrokerLogger  int8 = 8
	configResourceClientMetrics int8 = 16
	configResourceGroup         int8 = 32
)

func listConfigResources(env kapi.Env, _ context.Context, req *kmsg.ListConfigResourcesRequest) *kmsg.ListConfigResourcesResponse {
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	types := req.ResourceTypes
	if req.Version == 0 {
		types = []int8{configResourceClientMetrics}
	} else if len(types) == 0 {
		types = []int8{configResourceTopic, configResourceBroker}
	}
	for _, t := range types {
		switch t {
		case configResourceTopic, configResourceBroker, configResourceBrokerLogger, configResourceClientMetrics, configResourceGroup:
		default:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
	}
	cl, _ := env.Broker().Cluster()
	add := func(name string, typ int8) {
		r := kmsg.NewListConfigResourcesResponseConfigResource()
		r.Name, r.Type = name, typ
		resp.ConfigResources = append(resp.ConfigResources, r)
	}
	if slices.Contains(types, configResourceTopic) {
		for i := range cl.Topics {
			add(cl.Topics[i].Name, configResourceTopic)
		}
	}
	if slices.Contains(types, configResourceBroker) {
		for _, b := range cl.Brokers {
			add(strconv.Itoa(int(b.ID)), configResourceBroker)
		}
	}
	return resp
}

func listConfigResourcesError(req *kmsg.ListConfigResourcesRequest, code int16) *kmsg.ListConfigResourcesResponse {
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	resp.ErrorCode = code
	return resp
}
