package admin

import (
	"context"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeQuorum, key 55: versions 0-2 (flexible; fetch and caught-up
// times from 1; from 2 the voters' endpoints in Nodes, under the listener
// name CONTROLLER, and an error message). The metadata quorum (ClusterAdmin.Quorum) as Kafka's
// __cluster_metadata partition 0: leader, epoch (the raft term), high
// watermark (the commit index), voters and observers with their log end.
// Any other topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
const (
	describeQuorumKey = 55
	describeQuorumMin = 0
	describeQuorumMax = 2
)

// controllerListener names the voters' endpoints in DescribeQuorum v2, as
// Kafka's default controller listener is named.
const controllerListener = "CONTROLLER"

// metadataTopicName is the name Kafka gives the metadata log.
const metadataTopicName = "__cluster_metadata"

func describeQuorum(env kapi.Env, ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	ca, err := clusterAdmin(env)
	var q kapi.Quorum
	if err == nil {
		q, err = ca.Quorum(ctx)
	}
	if err != nil {
		resp := describeQuorumError(req, kapi.KafkaErr(err))
		resp.ErrorMessage = kapi.ErrMessage(err)
		return resp
	}
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.Nodes = quorumNodes(q)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDescribeQuorumResponseTopicPartition()
			p.Partition = rp.Partition
			if rt.Topic != metadataTopicName || rp.Partition != 0 {
				p.ErrorCode = kapi.KafkaErr(kapi.ErrUnknownTopicOrPartition)
			} else {
				quorumPartition(&p, q)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func quorumPartition(p *kmsg.DescribeQuorumResponseTopicPartition, q kapi.Quorum) {
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = q.LeaderID, q.LeaderEpoch, q.HighWatermark
	p.CurrentVoters, p.Observers = replicaStates(q.Voters), replicaStates(q.Observers)
}

// quorumNodes lists the endpoint of every member that has one.
func quorumNodes(q kapi.Quorum) []kmsg.DescribeQuorumResponseNode {
	var out []kmsg.DescribeQuorumResponseNode
	for _, r := range append(slices.Clone(q.Voters), q.Observers...) {
		host, port, err := net.SplitHostPort(r.Address)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil {
			continue
		}
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = r.ID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = controllerListener, host, uint16(p)
		n.Listeners = append(n.Listeners, l)
		out = append(out, n)
	}
	return out
}

func replicaStates(rs []kapi.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(rs))
	for _, r := range rs {
		st := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		st.ReplicaID, st.LogEndOffset = r.ID, r.LogEndOffset
		st.LastFetchTimestamp, st.LastCaughtUpTimestamp = r.LastFetchMs, r.LastCaughtUpMs
		out = append(out, st)
	}
	return out
}

func describeQuorumError(req *kmsg.DescribeQuorumRequest, code int16) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.ErrorCode = code
	return resp
}
