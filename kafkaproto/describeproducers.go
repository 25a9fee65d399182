package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker here, -1 when none did.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the producer's open
	// transaction in the partition, -1 when none is open.
	TxnStartOffset int64
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
