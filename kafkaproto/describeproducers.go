package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers, key 61: version 0 (flexible). The idempotent
// producers a partition leader remembers (ProducerStates), as
// kafka-transactions.sh describe-producers and kadm.DescribeProducers ask
// for them. runnel has no transactions, so the coordinator epoch is -1 and
// no transaction is open. A Broker without ProducerStates answers
// INVALID_REQUEST for every partition.
const (
	describeProducersKey = 61
	describeProducersMin = 0
	describeProducersMax = 0
)

// ProducerStates is an optional extension of a Broker: the producer state
// of a partition this broker leads (ErrNotLeader otherwise,
// ErrUnknownTopicOrPartition when it does not exist). Safe for concurrent
// use.
type ProducerStates interface {
	ActiveProducers(ctx context.Context, topic string, partition int32) ([]ActiveProducer, error)
}

// ActiveProducer is one idempotent producer a partition remembers.
type ActiveProducer struct {
	ID            int64
	Epoch         int16
	LastSequence  int32 // -1: none
	LastTimestamp int64 // unix ms of its last write; -1: unknown
}

func (s *Server) describeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	if err := s.checkAdminTopics(len(req.Topics)); err != nil {
		return describeProducersError(req, kafkaErr(err))
	}
	ps, ok := s.broker.(ProducerStates)
	if !ok {
		return describeProducersError(req, kafkaErr(errNoClusterAdmin))
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

func producersOf(ctx context.Context, ps ProducerStates, topic string, idx int32) kmsg.DescribeProducersResponseTopicPartition {
	p := kmsg.NewDescribeProducersResponseTopicPartition()
	p.Partition = idx
	active, err := ps.ActiveProducers(ctx, topic, idx)
	if err != nil {
		p.ErrorCode, p.ErrorMessage = kafkaErr(err), errMessage(err)
		return p
	}
	for _, a := range active {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = a.ID, int32(a.Epoch), a.LastSequence, a.LastTimestamp
		ap.CoordinatorEpoch = -1
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
