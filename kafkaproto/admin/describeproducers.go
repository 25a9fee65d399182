package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeProducers, key 61: version 0 (flexible). The idempotent
// producers a partition leader remembers (ProducerStates), as
// kafka-transactions.sh describe-producers and kadm.DescribeProducers ask
// for them, with the coordinator epoch of each one's last transaction
// marker and the first offset of its open transaction (-1: none). A Broker without ProducerStates answers
// INVALID_REQUEST for every partition.
const (
	describeProducersKey = 61
	describeProducersMin = 0
	describeProducersMax = 0
)

func describeProducers(env kapi.Env, ctx context.Context, req *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	if err := kapi.CheckAdminTopics(env, len(req.Topics)); err != nil {
		return describeProducersError(req, kapi.KafkaErr(err))
	}
	ps, ok := env.Broker().(kapi.ProducerStates)
	if !ok {
		return describeProducersError(req, kapi.KafkaErr(errNoClusterAdmin))
	}
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			t.Partitions = append(t.Partitions, producersOf(ctx, ps, rt.Topic, idx))
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func producersOf(ctx context.Context, ps kapi.ProducerStates, topic string, idx int32) kmsg.DescribeProducersResponseTopicPartition {
	p := kmsg.NewDescribeProducersResponseTopicPartition()
	p.Partition = idx
	active, err := ps.ActiveProducers(ctx, topic, idx)
	if err != nil {
		p.ErrorCode, p.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		return p
	}
	for _, a := range active {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = a.ID, int32(a.Epoch), a.LastSequence, a.LastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = a.CoordinatorEpoch, a.TxnStartOffset
		p.ActiveProducers = append(p.ActiveProducers, ap)
	}
	return p
}

func describeProducersError(req *kmsg.DescribeProducersRequest, code int16) *kmsg.DescribeProducersResponse {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition, p.ErrorCode = idx, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
