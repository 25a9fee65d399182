package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Produce, key 0: versions 3-12 (flexible from 9). Records are passed to
// the broker as received; partitions of one request are appended
// concurrently (at most produceParallelism at a time), each partition's
// batches in request order. acks=0 requests get no response; when one of
// their partitions fails the connection is closed instead, as Kafka does,
// so that the producer notices and refreshes its metadata. From v10 a
// NOT_LEADER_OR_FOLLOWER answer names the current leader (KIP-951).
const (
	produceKey = 0
	produceMin = 3
	produceMax = 12

	produceParallelism = 8
)

func (s *Server) produce(ctx context.Context, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var stopAppends time.Time // zero: none
	if req.TimeoutMillis > 0 && req.Acks != 0 {
		stopAppends = appendsUntil(time.Now(), time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	var pre error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		pre = fmt.Errorf("%w: acks %d", ErrInvalidRequiredAcks, req.Acks)
	case req.TransactionID != nil && !s.transactional():
		pre = ErrTransactionsUnsupported
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	// Sized once: grown by append, the jobs and the acks=all waits
	// (ackWaits.add) of a request of 100,000 partitions were each
	// reallocated and copied about 30 times.
	jobs := make([]partitionJob, 0, n)
	if w := ackWaitsFrom(ctx); w != nil && pre == nil {
		w.reserve(n)
	}
	for i, rt := range req.Topics {
		t := &resp.Topics[i]
		*t = kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			if pre != nil {
				setProduceError(p, pre)
				continue
			}
			jobs = append(jobs, partitionJob{rt.Topic, &rt.Partitions[j], p})
		}
	}
	s.appendAll(ctx, req.Acks, jobs, stopAppends)
	if req.Version >= 10 {
		s.addLeaderHints(ctx, resp)
	}
	return resp
}

// partitionJob is one partition of a produce request and its answer.
type partitionJob struct {
	topic string
	rp    *kmsg.ProduceRequestTopicPartition
	p     *kmsg.ProduceResponseTopicPartition
}

// appendAll appends the request's partitions, produceParallelism at a
// time on as many goroutines, each taking the next partition when done
// with one: a goroutine per partition grew a new stack for each append
// (16% of the CPU of a request of 100,000 partitions went to copying
// stacks, BenchmarkProduceRequestEachPartition in server/kafkadoor).
// A partition not begun by stop (when not zero) is not appended: it is
// answered REQUEST_TIMED_OUT (pipeline.go says why).
func (s *Server) appendAll(ctx context.Context, acks int16, jobs []partitionJob, stop time.Time) {
	if len(jobs) == 1 {
		s.producePartition(ctx, acks, jobs[0].topic, *jobs[0].rp, jobs[0].p)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(produceParallelism, len(jobs)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
				j := jobs[i]
				if !stop.IsZero() && time.Now().After(stop) {
					setProduceError(j.p, errAppendsOutOfTime)
					continue
				}
				s.producePartition(ctx, acks, j.topic, *j.rp, j.p)
			}
		})
	}
	wg.Wait()
}

// errAppendsOutOfTime answers a partition its request's appends did not
// reach in time; nothing of it was written.
var errAppendsOutOfTime = fmt.Errorf("%w: the request's timeout ran out before this partition's turn to be appended; nothing was written", ErrRequestTimedOut)

// appendsOutOfTimeMessage is errAppendsOutOfTime's ErrorMessage, made once:
// a request can answer 100,000s of partitions with it.
var appendsOutOfTimeMessage = kapi.ErrMessage(errAppendsOutOfTime)

// addLeaderHints tells a producer that hit NOT_LEADER_OR_FOLLOWER where the
// partition's leader is now, with its endpoint (KIP-951, v10+), so that it
// can move without a metadata round trip.
func (s *Server) addLeaderHints(ctx context.Context, resp *kmsg.ProduceResponse) {
	cl, _ := s.broker.Cluster()
	listed := map[int32]bool{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		ti, ok := cl.Topic(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code || !ok || p.Partition < 0 || int(p.Partition) >= len(ti.Partitions) {
				continue
			}
			pi := ti.Partitions[p.Partition]
			b, known := cl.Broker(pi.Leader)
			if !known {
				continue
			}
			host, port, reachable := endpoint(ctx, b)
			if !reachable {
				continue
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = pi.Leader, pi.LeaderEpoch
			if !listed[b.ID] {
				listed[b.ID] = true
				rb := kmsg.NewProduceResponseBroker()
				rb.NodeID, rb.Host, rb.Port = b.ID, host, port
				if b.Rack != "" {
					rb.Rack = &b.Rack
				}
				resp.Brokers = append(resp.Brokers, rb)
			}
		}
	}
}

// errAcksZeroFailed closes the connection of an acks=0 produce that failed.
var errAcksZeroFailed = errors.New("kafkaproto: acks=0 produce failed")

// silentProduceOutcome decides what an acks=0 produce sends: nothing, or
// (on any partition error) an error that closes the connection.
func silentProduceOutcome(resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("%w: %s[%d]: error code %d", errAcksZeroFailed, t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}

func (s *Server) producePartition(ctx context.Context, acks int16, topic string, rp kmsg.ProduceRequestTopicPartition, p *kmsg.ProduceResponseTopicPartition) {
	if len(rp.Records) == 0 {
		setProduceError(p, fmt.Errorf("%w: no records", ErrCorruptMessage))
		return
	}
	if rp2, ok := s.broker.(ReplicatedProducer); ok && acks == -1 {
		if w := ackWaitsFrom(ctx); w != nil {
			res, wait, err := rp2.AppendForAcks(ctx, topic, rp.Partition, rp.Records)
			if err != nil {
				setProduceError(p, err)
				return
			}
			p.BaseOffset, p.LogAppendTime, p.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			w.add(p, wait)
			return
		}
	}
	res, err := s.broker.Produce(ctx, topic, rp.Partition, rp.Records, acks)
	if err != nil {
		setProduceError(p, err)
		return
	}
	p.BaseOffset, p.LogAppendTime, p.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
}

func setProduceError(p *kmsg.ProduceResponseTopicPartition, err error) {
	p.ErrorCode = kapi.KafkaErr(err)
	if err == errAppendsOutOfTime {
		p.ErrorMessage = appendsOutOfTimeMessage
	} else {
		p.ErrorMessage = kapi.ErrMessage(err)
	}
	p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
}

func produceError(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// transactional reports whether the Broker coordinates transactions.
func (s *Server) transactional() bool {
	_, ok := s.broker.(TxnCoordinator)
	return ok
}

// produceResponseSize is the length of resp encoded by kmsg (unknown tagged
// fields, which this package never sets, are not counted: a response with
// them only grows its buffer). The connection sizes its buffer with it
// before encoding: grown by appends, the answer of a request of ~190,000
// partitions (~7 MB) was copied into buffers of doubling sizes, 87 MB of
// what a survivor allocated in 40 s after a kill -9 at 300,000 partitions
// (issue 19).
func produceResponseSize(resp *kmsg.ProduceResponse) int {
	v, flexible := resp.Version, resp.IsFlexible()
	arrayLen := func(n int) int {
		if flexible {
			return kbin.UvarintLen(uint32(n) + 1)
		}
		return 4
	}
	str := func(s string) int {
		if flexible {
			return kbin.UvarintLen(uint32(len(s))+1) + len(s)
		}
		return 2 + len(s)
	}
	nullable := func(s *string) int {
		switch {
		case s != nil:
			return str(*s)
		case flexible:
			return 1
		}
		return 2
	}
	n := arrayLen(len(resp.Topics))
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if v >= 13 {
			n += 16 // topic id
		} else {
			n += str(t.Topic)
		}
		n += arrayLen(len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 4 + 2 + 8 // partition, error code, base offset
			if v >= 2 {
				n += 8 // log append time
			}
			if v >= 5 {
				n += 8 // log start offset
			}
			if v >= 8 {
				n += arrayLen(len(p.ErrorRecords))
				for k := range p.ErrorRecords {
					n += 4 + nullable(p.ErrorRecords[k].ErrorMessage)
					if flexible {
						n++ // tags
					}
				}
				n += nullable(p.ErrorMessage)
			}
			if flexible {
				n++ // the count of tagged fields
				if p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 {
					n += 1 + 1 + 4 + 4 + 1 // tag, its length, leader id, epoch, its tags
				}
			}
		}
		if flexible {
			n++ // topic tags
		}
	}
	if v >= 1 {
		n += 4 // throttle
	}
	if flexible {
		n++ // the count of tagged fields
		if len(resp.Brokers) > 0 {
			b := arrayLen(len(resp.Brokers))
			for i := range resp.Brokers {
				br := &resp.Brokers[i]
				b += 4 + str(br.Host) + 4 + nullable(br.Rack) + 1 // node id, host, port, rack, tags
			}
			n += 1 + kbin.UvarintLen(uint32(b)) + b // tag, its length, the brokers
		}
	}
	return n
}
