// Package coordinators runs the node's coordinators on a broker: it gives
// the group coordinator (server/groups) its Backend and the transaction
// coordinator (server/txn) its StateLog, MarkerWriter and Cluster, over
// the partitions (server/broker), the metadata changes (server/admin), the
// metrics and the inter-broker port. The coordinators' logic stays in
// their packages, tested there with fakes of those interfaces; this is the
// real thing behind them. It never imports the root package server, which
// builds both once the broker runs (NewGroups, StartTxn) and closes them
// before the broker.
//
// Goroutines: the transaction coordinator's leadership follower (Txn,
// stopped by Txn.Close) besides the coordinators' own (see their
// packages). Locks: none of its own; nothing here is called with a
// coordinator's lock held but groups.Backend.Append (see server/groups).
package coordinators

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/metrics"

	"github.com/runnel/runnel/recordbatch"
)

// offsetsTopic is the group coordinator's internal topic.
const offsetsTopic = groups.OffsetsTopic

// Metadata is the metadata node as the coordinators read it; quorum.Node
// implements it.
type Metadata interface {
	Image() (*raftfsm.Image, <-chan struct{})
}

// Config is the node as both coordinators reach it.
type Config struct {
	NodeID  int32
	Meta    Metadata
	Broker  *broker.Broker
	Admin   *admin.Admin
	Metrics *metrics.Metrics
	// ReadRemote reads a partition led by broker leader (the HTTP door's
	// forwarding: one hop); HTTPError translates a local read's error
	// the way the HTTP door answers it (the group coordinator's HTTP
	// members read through it).
	ReadRemote func(ctx context.Context, leader int32, req api.ConsumeRequest) (api.ConsumeResult, error)
	HTTPError  func(error) error
	// DialBroker connects to another broker's inter-broker Kafka port
	// (transaction markers).
	DialBroker func(ctx context.Context, id int32) (net.Conn, error)
	Now        func() time.Time
	Logger     *slog.Logger
}

// groupsBackend is what the group coordinator (server/groups) reaches of
// this node: the metadata image, the controller, the offsets partitions led
// here, reads of any partition and the lag metrics.
type groupsBackend struct{ c Config }

var _ groups.Backend = groupsBackend{}

// NewGroups builds the group coordinator of this broker (not started).
func NewGroups(c Config, gc groups.Config) *groups.Coordinator {
	return groups.New(gc, groupsBackend{c})
}

func (b groupsBackend) Image() (*raftfsm.Image, <-chan struct{}) { return b.c.Meta.Image() }

func (b groupsBackend) CreateTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) error {
	_, err := b.c.Admin.CreateTopic(ctx, admin.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: configs}, false)
	return err
}

func (b groupsBackend) Append(ctx context.Context, idx int32, recs []groups.Record) error {
	br := b.c.Broker
	if br == nil {
		return fmt.Errorf("%w: coordinator shutting down", kafkaproto.ErrCoordinatorNotAvailable)
	}
	p, err := br.Partition(offsetsTopic, idx)
	if err != nil {
		return fmt.Errorf("%w: %v", kafkaproto.ErrNotCoordinator, err)
	}
	nr := make([]recordbatch.NewRecord, len(recs))
	for i, r := range recs {
		nr[i] = recordbatch.NewRecord{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	}
	if _, err := p.Produce(ctx, recordbatch.Build(nr), -1); err != nil {
		return coordinatorAppendError(err)
	}
	return nil
}

// coordinatorAppendError turns the error of an append to the offsets
// partition into what Kafka's coordinator answers, so clients do what they
// would with Kafka: a partition that moved or a failing disk means this
// broker is no longer the coordinator (NOT_COORDINATOR: find it again); too
// few replicas or a timeout means the coordinator is briefly unavailable
// (COORDINATOR_NOT_AVAILABLE: retry). Never NOT_LEADER_FOR_PARTITION, which
// a client does not expect from a group call.
func coordinatorAppendError(err error) error {
	switch {
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, segments.ErrStorage):
		return fmt.Errorf("%w: %v", kafkaproto.ErrNotCoordinator, err)
	case errors.Is(err, broker.ErrNotEnoughReplicas), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", kafkaproto.ErrCoordinatorNotAvailable, err)
	}
	return err
}

func (b groupsBackend) OffsetsLog(idx int32) (groups.Log, error) {
	br := b.c.Broker
	if br == nil {
		return nil, fmt.Errorf("%w: coordinator shutting down", kafkaproto.ErrCoordinatorNotAvailable)
	}
	p, err := br.Partition(offsetsTopic, idx)
	if err != nil {
		return nil, err
	}
	return offsetsLog{p}, nil
}

// offsetsLog is an offsets partition as the coordinator's loader reads it.
type offsetsLog struct{ p *broker.Partition }

func (l offsetsLog) StartOffset() int64       { return l.p.LogStart() }
func (l offsetsLog) EndOffset() int64         { return l.p.LogEnd() }
func (l offsetsLog) HighWatermark() int64     { return l.p.HighWatermark() }
func (l offsetsLog) Changed() <-chan struct{} { return l.p.Changed() }

func (l offsetsLog) ReadRecords(off int64, maxRecords, maxBytes int) ([]groups.Record, int64, int64, error) {
	res, err := l.p.ReadDecoded(off, maxRecords, maxBytes, false)
	out := make([]groups.Record, len(res.Records))
	for i, r := range res.Records {
		out[i] = groups.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
	}
	return out, res.Next, res.HWM, err
}

// BatchEnd returns the offset after the batch holding off, read from its
// header alone (no CRC or record check: the batch is known to be bad).
func (l offsetsLog) BatchEnd(off int64) (int64, error) {
	chunk, err := l.p.Read(off, recordbatch.HeaderLen)
	if err != nil {
		return 0, err
	}
	data, err := chunk.Bytes()
	chunk.Close()
	if err != nil {
		return 0, err
	}
	if len(data) < recordbatch.HeaderLen {
		return 0, fmt.Errorf("%w: %d bytes at %d", recordbatch.ErrCorruptBatch, len(data), off)
	}
	return max(recordbatch.ParseHeader(data).NextOffset(), off+1), nil
}

// Read reads one partition wherever its leader is (one forwarding hop
// started here, even when this request was itself forwarded: the
// coordinator's read is a request of its own).
func (b groupsBackend) Read(ctx context.Context, t groups.TopicPartition, offset int64, maxRecords, maxBytes int, uncommitted bool) (api.ConsumeResult, error) {
	img, _ := b.c.Meta.Image()
	top, ok := img.Topics.Lookup(t.Topic)
	if !ok || int(t.Partition) >= len(top.Partitions) {
		return api.ConsumeResult{}, fmt.Errorf("%w: %s-%d", api.ErrUnknownPartition, t.Topic, t.Partition)
	}
	req := api.ConsumeRequest{Topic: t.Topic, Partition: t.Partition, Offset: offset, MaxRecords: max(maxRecords, 1), MaxBytes: max(maxBytes, 1),
		ReadUncommitted: uncommitted}
	leader := top.Partitions[t.Partition].Leader
	if leader != b.c.NodeID {
		if _, ok := img.Brokers[leader]; !ok {
			return api.ConsumeResult{}, fmt.Errorf("%w: %s-%d has no leader", api.ErrNotLeader, t.Topic, t.Partition)
		}
		return b.c.ReadRemote(ctx, leader, req)
	}
	res, err := b.c.Broker.ReadRecords(ctx, broker.ReadRequest{Topic: t.Topic, Partition: t.Partition, Offset: offset,
		MaxRecords: req.MaxRecords, MaxBytes: req.MaxBytes, ReadUncommitted: uncommitted})
	if err != nil {
		return api.ConsumeResult{}, b.c.HTTPError(err)
	}
	out := api.ConsumeResult{NextOffset: res.Next, HighWatermark: res.HWM, StartOffset: res.LogStart}
	for _, r := range res.Records {
		cr := api.ConsumedRecord{Partition: t.Partition, Offset: r.Offset, Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value,
			Transactional: r.Transactional}
		for _, h := range r.Headers {
			cr.Headers = append(cr.Headers, api.Header{Key: h.Key, Value: h.Value})
		}
		out.Records = append(out.Records, cr)
	}
	return out, nil
}

// OffsetForTime is the first offset whose record is at or after ts (the
// end when there is none).
func (b groupsBackend) OffsetForTime(ctx context.Context, t groups.TopicPartition, ts, end int64) (int64, error) {
	img, _ := b.c.Meta.Image()
	top := img.Topics.Get(t.Topic)
	leader := top.Partitions[t.Partition].Leader
	if leader == b.c.NodeID {
		p, err := b.c.Broker.Partition(t.Topic, t.Partition)
		if err != nil {
			return 0, b.c.HTTPError(err)
		}
		return p.ResolveOffset(0, &ts, false)
	}
	if _, ok := img.Brokers[leader]; !ok {
		return 0, fmt.Errorf("%w: %s-%d has no leader", api.ErrNotLeader, t.Topic, t.Partition)
	}
	res, err := b.c.ReadRemote(ctx, leader,
		api.ConsumeRequest{Topic: t.Topic, Partition: t.Partition, Timestamp: &ts, MaxRecords: 1, MaxBytes: 1})
	if err != nil {
		return 0, err
	}
	if len(res.Records) > 0 {
		return res.Records[0].Offset, nil
	}
	return min(res.NextOffset, end), nil
}

func (b groupsBackend) SetGroupLag(group string, byTopic map[string]int64) {
	b.c.Metrics.SetGroupLag(group, byTopic)
}
func (b groupsBackend) ForgetGroupLag(group string) { b.c.Metrics.ForgetGroupLag(group) }
func (b groupsBackend) Consumed(topic string, records, bytes int) {
	b.c.Metrics.Consumed(topic, records, bytes)
}
