package rest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/api"
)

// memBackend is an in-memory api.Backend for handler tests: real offsets,
// atomic per-partition appends and long polls woken by appends, so the
// handlers are exercised against the contract, not against canned answers.
type memBackend struct {
	notReady atomic.Pointer[error]
	consumes atomic.Int64 // Consume calls in flight

	mu     sync.Mutex // guards topics and every memPartition's fields
	topics map[string]*memTopic
}

type memTopic struct {
	name    string
	configs map[string]string
	parts   []*memPartition
}

type memPartition struct {
	records []api.ConsumedRecord
	start   int64         // log start offset
	grew    chan struct{} // closed and replaced on every append
}

func newMemBackend() *memBackend {
	return &memBackend{topics: map[string]*memTopic{}}
}

func (m *memBackend) setNotReady(err error) {
	if err == nil {
		m.notReady.Store(nil)
		return
	}
	m.notReady.Store(&err)
}

func (m *memBackend) Ready() error {
	if p := m.notReady.Load(); p != nil {
		return *p
	}
	return nil
}

func (m *memBackend) Cluster(ctx context.Context) (api.Cluster, error) {
	bs, _ := m.Brokers(ctx)
	return api.Cluster{ClusterID: "test-cluster", LeaderID: 1,
		Controllers: []api.Controller{{ID: 1, Address: "127.0.0.1:9093", Role: "leader", Term: 2, LastIndex: 10, CommitIndex: 10}},
		Brokers:     bs}, nil
}

func (m *memBackend) Brokers(context.Context) ([]api.Broker, error) {
	return []api.Broker{{ID: 1, State: api.BrokerAlive, Epoch: 3, MetadataOffset: 10,
		HTTPAddress: "127.0.0.1:8080", KafkaAddress: "127.0.0.1:9092"}}, nil
}

func (m *memBackend) ListTopics(_ context.Context, q api.ListQuery) (api.TopicPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name := range m.topics {
		names = append(names, name)
	}
	names, more := api.PageNames(names, q)
	out := api.TopicPage{More: more}
	for _, name := range names {
		out.Topics = append(out.Topics, api.TopicSummary{Name: name, Partitions: int32(len(m.topics[name].parts)), ReplicationFactor: 1})
	}
	return out, nil
}

func (m *memBackend) CreateTopic(_ context.Context, req api.CreateTopicRequest) (api.TopicDetail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.topics[req.Name]; ok {
		return api.TopicDetail{}, fmt.Errorf("%w: %s", api.ErrTopicExists, req.Name)
	}
	if err := checkConfigs(req.Configs); err != nil {
		return api.TopicDetail{}, err
	}
	n := req.Partitions
	if n < 0 {
		n = 1
	}
	t := &memTopic{name: req.Name, configs: map[string]string{}}
	for k, v := range req.Configs {
		t.configs[k] = v
	}
	for range n {
		t.parts = append(t.parts, &memPartition{grew: make(chan struct{})})
	}
	m.topics[req.Name] = t
	return t.detailLocked(), nil
}

func checkConfigs(cs map[string]string) error {
	for k, v := range cs {
		switch k {
		case "retention.ms", "max.message.bytes", "segment.bytes":
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("%w: %s=%q is not a number", api.ErrInvalidConfig, k, v)
			}
		case "cleanup.policy":
		default:
			return fmt.Errorf("%w: unknown config %q", api.ErrInvalidConfig, k)
		}
	}
	return nil
}

func (t *memTopic) detailLocked() api.TopicDetail {
	td := api.TopicDetail{Name: t.name, ID: "00000000-0000-0000-0000-000000000001", ReplicationFactor: 1, Configs: map[string]string{}}
	for k, v := range t.configs {
		td.Configs[k] = v
	}
	for i, p := range t.parts {
		end := p.start + int64(len(p.records))
		td.Partitions = append(td.Partitions, api.PartitionDetail{Partition: int32(i), Leader: 1,
			Replicas: []int32{1}, ISR: []int32{1}, StartOffset: p.start, EndOffset: end, HighWatermark: end})
	}
	return td
}

func (m *memBackend) topic(name string) (*memTopic, error) {
	t, ok := m.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", api.ErrUnknownTopic, name)
	}
	return t, nil
}

func (m *memBackend) DescribeTopic(_ context.Context, name string) (api.TopicDetail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.topic(name)
	if err != nil {
		return api.TopicDetail{}, err
	}
	return t.detailLocked(), nil
}

func (m *memBackend) DeleteTopic(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.topic(name)
	if err != nil {
		return err
	}
	delete(m.topics, name)
	for _, p := range t.parts {
		close(p.grew) // waiting readers find the topic gone
		p.grew = make(chan struct{})
	}
	return nil
}

func (m *memBackend) AlterTopicConfigs(_ context.Context, name string, set map[string]*string) (api.TopicDetail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.topic(name)
	if err != nil {
		return api.TopicDetail{}, err
	}
	check := map[string]string{}
	for k, v := range set {
		if v != nil {
			check[k] = *v
		}
	}
	if err := checkConfigs(check); err != nil {
		return api.TopicDetail{}, err
	}
	for k, v := range set {
		if v == nil {
			delete(t.configs, k)
		} else {
			t.configs[k] = *v
		}
	}
	return t.detailLocked(), nil
}

func (m *memBackend) Produce(_ context.Context, topic string, recs []api.ProduceRecord, acks int) ([]api.RecordOffset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.topic(topic)
	if err != nil {
		return nil, err
	}
	limit := int64(1 << 20)
	if v, ok := t.configs["max.message.bytes"]; ok {
		limit, _ = strconv.ParseInt(v, 10, 64)
	}
	parts := make([]int32, len(recs))
	for i, r := range recs { // check everything before writing anything
		p := int32(len(r.Key) % len(t.parts))
		if r.Partition != nil {
			p = *r.Partition
		}
		if p >= int32(len(t.parts)) {
			return nil, fmt.Errorf("%w: %s/%d", api.ErrUnknownPartition, topic, p)
		}
		if int64(len(r.Key)+len(r.Value)) > limit {
			return nil, fmt.Errorf("%w: record %d", api.ErrTooLarge, i)
		}
		parts[i] = p
	}
	out := make([]api.RecordOffset, len(recs))
	grown := map[int32]bool{}
	for i, r := range recs {
		mp := t.parts[parts[i]]
		ts := time.UnixMilli(1_700_000_000_000 + int64(i))
		if r.Timestamp != nil {
			ts = *r.Timestamp
		}
		off := mp.start + int64(len(mp.records))
		mp.records = append(mp.records, api.ConsumedRecord{Partition: parts[i], Offset: off, Timestamp: ts,
			Key: r.Key, Value: r.Value, Headers: r.Headers})
		out[i] = api.RecordOffset{Partition: parts[i], Offset: off}
		if acks == api.AcksNone {
			out[i].Offset = -1
		}
		grown[parts[i]] = true
	}
	for p := range grown {
		close(t.parts[p].grew)
		t.parts[p].grew = make(chan struct{})
	}
	return out, nil
}

func (m *memBackend) Consume(ctx context.Context, req api.ConsumeRequest) (api.ConsumeResult, error) {
	m.consumes.Add(1)
	defer m.consumes.Add(-1)
	var timer <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		res, grew, err := m.read(&req)
		if err != nil || len(res.Records) > 0 || req.Wait == 0 {
			return res, err
		}
		select {
		case <-grew:
		case <-timer:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// read resolves req's position (rewriting req to a plain offset) and reads.
func (m *memBackend) read(req *api.ConsumeRequest) (api.ConsumeResult, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.topic(req.Topic)
	if err != nil {
		return api.ConsumeResult{}, nil, err
	}
	if req.Partition >= int32(len(t.parts)) {
		return api.ConsumeResult{}, nil, fmt.Errorf("%w: %s/%d", api.ErrUnknownPartition, req.Topic, req.Partition)
	}
	p := t.parts[req.Partition]
	hwm := p.start + int64(len(p.records))
	switch {
	case req.Timestamp != nil:
		req.Offset = hwm
		for _, r := range p.records {
			if r.Timestamp.UnixMilli() >= *req.Timestamp {
				req.Offset = r.Offset
				break
			}
		}
		req.Timestamp = nil
	case req.Offset == api.OffsetEarliest:
		req.Offset = p.start
	case req.Offset == api.OffsetLatest:
		req.Offset = hwm
	}
	if req.Offset < p.start || req.Offset > hwm {
		return api.ConsumeResult{}, nil, fmt.Errorf("%w: %d not in [%d, %d]", api.ErrOffsetOutOfRange, req.Offset, p.start, hwm)
	}
	res := api.ConsumeResult{NextOffset: req.Offset, HighWatermark: hwm, StartOffset: p.start}
	size := 0
	for _, r := range p.records[req.Offset-p.start:] {
		if len(res.Records) >= req.MaxRecords || (len(res.Records) > 0 && size+len(r.Value) > req.MaxBytes) {
			break
		}
		size += len(r.Value)
		res.Records = append(res.Records, r)
		res.NextOffset = r.Offset + 1
	}
	return res, p.grew, nil
}

// fullBackend adds the optional interfaces.
type fullBackend struct{ *memBackend }

func (fullBackend) Series(context.Context) (api.Series, error) {
	return api.Series{StartMS: 1_700_000_000_000, IntervalMS: 10_000,
		Topics: []api.TopicSeries{{Topic: "t", ProducedRecords: []int64{1, 2}, ProducedBytes: []int64{10, 20},
			ConsumedRecords: []int64{0, 1}, ConsumedBytes: []int64{0, 10}}},
		Groups: []api.GroupSeries{{Group: "g", Lag: []int64{-1, 3}}}}, nil
}

func (fullBackend) KafkaAPIVersions(context.Context) ([]api.KafkaAPIVersion, error) {
	return []api.KafkaAPIVersion{{APIKey: 0, Name: "Produce", MinVersion: 3, MaxVersion: 11},
		{APIKey: 18, Name: "ApiVersions", MinVersion: 0, MaxVersion: 4}}, nil
}
