package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeCluster, key 60: versions 0-1 (always flexible). Only the broker
// endpoint type (1) is served; controllers are not reachable over Kafka.
const (
	describeClusterKey = 60
	describeClusterMin = 0
	describeClusterMax = 1

	endpointTypeBrokers = 1
)

func describeCluster(env kapi.Env, ctx context.Context, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	cl, _ := env.Broker().Cluster()
	resp.ClusterID, resp.ControllerID = cl.ClusterID, cl.ControllerID
	for i := range cl.Brokers {
		b := &cl.Brokers[i]
		host, port, ok := env.Endpoint(ctx, b)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, host, port
		if b.Rack != "" {
			rb.Rack = &b.Rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}

func describeClusterError(req *kmsg.DescribeClusterRequest, code int16) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode = code
	return resp
}
