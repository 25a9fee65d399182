package admin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ElectLeaders, key 43: versions 0-2 (flexible from 2; election type from
// 1, v0 is preferred). Preferred elects each partition's first replica
// when it is alive and in sync (ELECTION_NOT_NEEDED when it leads
// already, PREFERRED_LEADER_NOT_AVAILABLE otherwise). Unclean gives a
// partition with no leader a new one: an in-sync replica when one is
// alive, else any alive replica, but only when the topic sets
// unclean.leader.election.enable=true (ELIGIBLE_LEADERS_NOT_AVAILABLE
// otherwise); unlike Kafka, the admin call does not override the topic's
// setting, so losing acknowledged records stays a per-topic choice.
// Null topics: every partition of every topic. Served by
// ClusterAdmin.ElectLeaders, the code path of HTTP POST
// /v1/topics/{topic}/elect-leaders.
const (
	electLeadersKey = 43
	electLeadersMin = 0
	electLeadersMax = 2
)

// Election types of ElectLeaders v1+.
const (
	electionPreferred = 0
	electionUnclean   = 1
)

func electLeaders(env kapi.Env, ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	ctx, cancel := kapi.AdminContext(ctx, req.TimeoutMillis)
	defer cancel()
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if err := checkElection(env, req); err != nil {
		return electLeadersError(req, kapi.KafkaErr(err))
	}
	ca, _ := clusterAdmin(env)
	topics := req.Topics
	if topics == nil { // every partition of every topic
		cl, _ := env.Broker().Cluster()
		for _, t := range cl.Topics {
			topics = append(topics, kmsg.ElectLeadersRequestTopic{Topic: t.Name})
		}
	}
	for _, rt := range topics {
		resp.Topics = append(resp.Topics, electTopic(env, ctx, ca, rt, req.ElectionType == electionUnclean))
	}
	return resp
}

// checkElection refuses what no partition can be answered for.
func checkElection(env kapi.Env, req *kmsg.ElectLeadersRequest) error {
	if _, err := clusterAdmin(env); err != nil {
		return err
	}
	if req.ElectionType != electionPreferred && req.ElectionType != electionUnclean {
		return fmt.Errorf("%w: election type %d", kapi.ErrInvalidRequest, req.ElectionType)
	}
	return kapi.CheckAdminTopics(env, len(req.Topics))
}

func electTopic(env kapi.Env, ctx context.Context, ca kapi.ClusterAdmin, rt kmsg.ElectLeadersRequestTopic, unclean bool) kmsg.ElectLeadersResponseTopic {
	t := kmsg.NewElectLeadersResponseTopic()
	t.Topic = rt.Topic
	results, err := ca.ElectLeaders(ctx, rt.Topic, rt.Partitions, unclean)
	parts := rt.Partitions
	if parts == nil { // the whole topic: what the broker answered for
		parts = slices.Sorted(maps.Keys(results))
	}
	for _, p := range parts {
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = p
		perr := err
		if perr == nil {
			perr = results[p]
		}
		rp.ErrorCode, rp.ErrorMessage = kapi.KafkaErr(perr), kapi.ErrMessage(perr)
		t.Partitions = append(t.Partitions, rp)
	}
	return t
}

func electLeadersError(req *kmsg.ElectLeadersRequest, code int16) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 {
		resp.ErrorCode = code
	}
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
