package kafkaproto

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization (Options.RequireAuth): before a client request is served,
// every resource it names needs the operation Kafka documents for its API
// (Produce: write topic, Fetch: read topic, CreateTopics: create cluster or
// topic, DeleteTopics: delete topic, group APIs: read group, ...). A
// request missing one is answered whole with TOPIC_, GROUP_, CLUSTER_ or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED in every error field; Metadata
// instead leaves out (or, when named, fails) the topics the principal may
// not describe. Connections on the peer door are not authorized (the
// raft port authenticated them as brokers).

const kafkaCluster = "kafka-cluster"

// perm is one permission a request needs, and the code it fails with.
type perm struct {
	resourceType, name, op string
	code                   int16
}

func topicPerm(name, op string) perm {
	return perm{"topic", name, op, kerr.TopicAuthorizationFailed.Code}
}
func groupPerm(name, op string) perm {
	return perm{"group", name, op, kerr.GroupAuthorizationFailed.Code}
}
func clusterPerm(op string) perm {
	return perm{"cluster", kafkaCluster, op, kerr.ClusterAuthorizationFailed.Code}
}
func txnPerm(name, op string) perm {
	return perm{"transactional_id", name, op, kerr.TransactionalIDAuthorizationFailed.Code}
}

// authorize returns the error code to fail req with, or 0.
func (c *conn) authorize(req kmsg.Request) int16 {
	az, ok := c.s.broker.(KafkaAuthorizer)
	if !ok || !c.s.opts.RequireAuth || c.state.door == peerDoor {
		return 0
	}
	host := remoteHost(c.nc)
	if mr, ok := req.(*kmsg.MetadataRequest); ok && mr.AllowAutoTopicCreation {
		// Auto-creation needs create on the cluster or on each named topic.
		for _, t := range mr.Topics {
			if t.Topic != nil && !az.Authorize(c.state.principal, host, "cluster", kafkaCluster, "create") &&
				!az.Authorize(c.state.principal, host, "topic", *t.Topic, "create") {
				mr.AllowAutoTopicCreation = false
			}
		}
	}
	for _, p := range requestPerms(req) {
		if p.op == "create" && p.resourceType == "topic" && az.Authorize(c.state.principal, host, "cluster", kafkaCluster, "create") {
			continue // Kafka: create on the cluster covers every topic
		}
		if !az.Authorize(c.state.principal, host, p.resourceType, p.name, p.op) {
			return p.code
		}
	}
	return 0
}

func remoteHost(nc net.Conn) string {
	h, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return h
}

// requestPerms lists what a request needs (Kafka's documented mapping).
func requestPerms(req kmsg.Request) []perm {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest, *kmsg.MetadataRequest:
		return nil // Metadata is filtered after it is served (filterMetadata)
	case *kmsg.ProduceRequest:
		ps := topicsPerms(r.Topics, func(t kmsg.ProduceRequestTopic) string { return t.Topic }, "write")
		if r.TransactionID != nil {
			ps = append(ps, txnPerm(*r.TransactionID, "write"))
		}
		return ps
	case *kmsg.FetchRequest:
		ps := make([]perm, 0, len(r.Topics))
		for _, t := range r.Topics {
			if !isUnknownIDTopic(t.Topic) { // no topic to protect: UNKNOWN_TOPIC_ID
				ps = append(ps, topicPerm(t.Topic, "read"))
			}
		}
		return ps
	case *kmsg.ListOffsetsRequest:
		return topicsPerms(r.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic }, "describe")
	case *kmsg.OffsetForLeaderEpochRequest:
		return topicsPerms(r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }, "describe")
	case *kmsg.CreateTopicsRequest:
		return topicsPerms(r.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic }, "create")
	case *kmsg.DeleteTopicsRequest:
		ps := make([]perm, 0, len(r.TopicNames)+len(r.Topics))
		for _, n := range r.TopicNames {
			ps = append(ps, topicPerm(n, "delete"))
		}
		for _, t := range r.Topics {
			if t.Topic == nil {
				return []perm{clusterPerm("delete")} // by id: superusers only
			}
			ps = append(ps, topicPerm(*t.Topic, "delete"))
		}
		return ps
	case *kmsg.CreatePartitionsRequest:
		return topicsPerms(r.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic }, "alter")
	case *kmsg.DeleteRecordsRequest:
		return topicsPerms(r.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic }, "delete")
	case *kmsg.DescribeConfigsRequest:
		return configPerms(len(r.Resources), func(i int) (kmsg.ConfigResourceType, string) {
			return r.Resources[i].ResourceType, r.Resources[i].ResourceName
		}, "describe_configs")
	case *kmsg.IncrementalAlterConfigsRequest:
		return configPerms(len(r.Resources), func(i int) (kmsg.ConfigResourceType, string) {
			return r.Resources[i].ResourceType, r.Resources[i].ResourceName
		}, "alter_configs")
	case *kmsg.AlterConfigsRequest:
		return configPerms(len(r.Resources), func(i int) (kmsg.ConfigResourceType, string) {
			return r.Resources[i].ResourceType, r.Resources[i].ResourceName
		}, "alter_configs")
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return []perm{txnPerm(*r.TransactionalID, "write")}
		}
		return nil // idempotence alone: its produces need write on their topics (KIP-679)
	case *kmsg.DescribeClusterRequest, *kmsg.DescribeLogDirsRequest, *kmsg.DescribeQuorumRequest, *kmsg.ListPartitionReassignmentsRequest:
		return []perm{clusterPerm("describe")}
	case *kmsg.ListConfigResourcesRequest:
		return []perm{clusterPerm("describe_configs")}
	case *kmsg.DescribeACLsRequest:
		return []perm{clusterPerm("describe")}
	case *kmsg.DescribeClientQuotasRequest:
		return []perm{clusterPerm("describe_configs")} // Kafka's mapping
	case *kmsg.AlterClientQuotasRequest:
		return []perm{clusterPerm("alter_configs")}
	case *kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest,
		*kmsg.UpdateFeaturesRequest:
		return []perm{clusterPerm("alter")}
	case *kmsg.DescribeTopicPartitionsRequest:
		return topicsPerms(r.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) string { return t.Topic }, "describe")
	}
	return groupRequestPerms(req)
}

func groupRequestPerms(req kmsg.Request) []perm {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		ps := make([]perm, 0, len(keys))
		for _, k := range keys {
			if r.CoordinatorType == 1 {
				ps = append(ps, txnPerm(k, "describe"))
			} else {
				ps = append(ps, groupPerm(k, "describe"))
			}
		}
		return ps
	case *kmsg.JoinGroupRequest:
		return []perm{groupPerm(r.Group, "read")}
	case *kmsg.SyncGroupRequest:
		return []perm{groupPerm(r.Group, "read")}
	case *kmsg.HeartbeatRequest:
		return []perm{groupPerm(r.Group, "read")}
	case *kmsg.LeaveGroupRequest:
		return []perm{groupPerm(r.Group, "read")}
	case *kmsg.OffsetCommitRequest:
		return append([]perm{groupPerm(r.Group, "read")},
			topicsPerms(r.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic }, "read")...)
	case *kmsg.OffsetFetchRequest:
		ps := []perm{}
		if r.Version < 8 {
			ps = append(ps, groupPerm(r.Group, "describe"))
			return append(ps, topicsPerms(r.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic }, "describe")...)
		}
		for _, g := range r.Groups {
			ps = append(ps, groupPerm(g.Group, "describe"))
			ps = append(ps, topicsPerms(g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic }, "describe")...)
		}
		return ps
	case *kmsg.DescribeGroupsRequest:
		return namesPerms(r.Groups, groupPerm, "describe")
	case *kmsg.DeleteGroupsRequest:
		return namesPerms(r.Groups, groupPerm, "delete")
	case *kmsg.ListGroupsRequest:
		return []perm{clusterPerm("describe")}
	case *kmsg.OffsetDeleteRequest:
		return append([]perm{groupPerm(r.Group, "delete")},
			topicsPerms(r.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic }, "read")...)
	}
	return txnRequestPerms(req)
}

// txnRequestPerms: Kafka's mapping for the transaction APIs.
func txnRequestPerms(req kmsg.Request) []perm {
	switch r := req.(type) {
	case *kmsg.AddPartitionsToTxnRequest:
		return append([]perm{txnPerm(r.TransactionalID, "write")},
			topicsPerms(r.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) string { return t.Topic }, "write")...)
	case *kmsg.AddOffsetsToTxnRequest:
		return []perm{txnPerm(r.TransactionalID, "write"), groupPerm(r.Group, "read")}
	case *kmsg.EndTxnRequest:
		return []perm{txnPerm(r.TransactionalID, "write")}
	case *kmsg.TxnOffsetCommitRequest:
		return append([]perm{txnPerm(r.TransactionalID, "write"), groupPerm(r.Group, "read")},
			topicsPerms(r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic }, "read")...)
	case *kmsg.DescribeTransactionsRequest:
		return namesPerms(r.TransactionalIDs, txnPerm, "describe")
	case *kmsg.ListTransactionsRequest:
		return nil // the answer leaves out what the principal may not describe
	}
	// An API without a mapping here: cluster-wide changes, superusers only.
	return []perm{clusterPerm("alter")}
}

func topicsPerms[T any](ts []T, name func(T) string, op string) []perm {
	ps := make([]perm, len(ts))
	for i, t := range ts {
		ps[i] = topicPerm(name(t), op)
	}
	return ps
}

func namesPerms(names []string, mk func(string, string) perm, op string) []perm {
	ps := make([]perm, len(names))
	for i, n := range names {
		ps[i] = mk(n, op)
	}
	return ps
}

func configPerms(n int, res func(int) (kmsg.ConfigResourceType, string), op string) []perm {
	ps := make([]perm, 0, n)
	for i := range n {
		switch t, name := res(i); t {
		case kmsg.ConfigResourceTypeTopic:
			ps = append(ps, topicPerm(name, op))
		default: // brokers and broker loggers
			ps = append(ps, clusterPerm(op))
		}
	}
	return ps
}

// filterMetadata removes from a Metadata response the topics the
// principal may not describe, or fails them when the request named them.
func (c *conn) filterMetadata(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	az, ok := c.s.broker.(KafkaAuthorizer)
	if !ok || !c.s.opts.RequireAuth || c.state.door == peerDoor {
		return
	}
	host := remoteHost(c.nc)
	named := req.Topics != nil
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if t.Topic == nil || az.Authorize(c.state.principal, host, "topic", *t.Topic, "describe") {
			kept = append(kept, t)
			continue
		}
		if named {
			t.ErrorCode, t.Partitions = kerr.TopicAuthorizationFailed.Code, nil
			kept = append(kept, t)
		}
	}
	resp.Topics = kept
}
