package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeGroups, key 15: versions 0-5 (flexible from 5; v4+ instance ids).
// Authorized operations are not reported (no ACLs yet).
const (
	describeGroupsKey = 15
	describeGroupsMin = 0
	describeGroupsMax = 5
)

func describeGroups(env kapi.Env, ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	gc := coordinator(env)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		if gc == nil {
			rg.ErrorCode = kapi.GroupErr(errNoCoordinator)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := gc.DescribeGroup(ctx, name)
		rg.ErrorCode = kapi.GroupErr(err)
		if err == nil {
			rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func describeGroupsError(req *kmsg.DescribeGroupsRequest, code int16) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = name, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
