package kafkaproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// memBroker is a small in-memory Broker for the listener's unit tests. It
// stores batches as received, assigns offsets, checks CRCs and keeps the
// last sequence per producer. It is not runnel's broker (that lives in
// server and is exercised by the end-to-end tests).
type memBroker struct {
	altUser atomic.Bool // CheckPassword also knows mallory (sasl_test.go)
	mu      sync.Mutex
	topics  map[string]*memTopic
	cluster *Cluster
	changed chan struct{}
	nextPID int64
	created int          // topics created so far: part of their ids
	chunks  atomic.Int64 // open chunks, to find leaks
	sockets atomic.Int64 // chunks written straight to a TCP socket (sendfile path)
	// emptyFetches counts fetches that found nothing to return: the
	// listener took the partition's Notify channel before each (fetchWaits),
	// so an append after one wakes the waiting fetch.
	emptyFetches atomic.Int64
	reads        atomic.Int64 // partitions read by Fetch
	watches      atomic.Int64 // Watch calls
	// noRecordReads counts the Fetch calls asked for no records
	// (FetchRequest.NoRecords): the reply had no room left.
	noRecordReads atomic.Int64
	watchMisses   atomic.Int64 // Watch calls left to fail (a topic the broker applies only when read)
	host          string
	port          int32
}

type memTopic struct {
	id      [16]byte
	parts   []*memPart
	configs map[string]string
}

type memPart struct {
	batches  [][]byte // each with its base offset written in
	start    int64
	end      int64
	notify   chan struct{}
	watchers Watchers        // fetch sessions' watches (Watch)
	lastSeq  map[int64]int32 // producer id -> last sequence stored
	lastBase map[int64]int64 // producer id -> base offset of that batch
}

func newMemBroker() *memBroker {
	b := &memBroker{topics: make(map[string]*memTopic), changed: make(chan struct{}), nextPID: 1000,
		host: "127.0.0.1", port: 9092}
	b.rebuildLocked()
	return b
}

func (b *memBroker) Cluster() (*Cluster, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster, b.changed
}

// rebuildLocked publishes a new metadata snapshot.
func (b *memBroker) rebuildLocked() {
	cl := &Cluster{ClusterID: "test-cluster", ControllerID: 1, Self: 1,
		Brokers: []BrokerInfo{{ID: 1, Host: b.host, Port: b.port}}}
	for name, t := range b.topics {
		ti := TopicInfo{Name: name, ID: t.id}
		for i := range t.parts {
			ti.Partitions = append(ti.Partitions, PartitionInfo{Partition: int32(i), Leader: 1,
				Replicas: []int32{1}, ISR: []int32{1}})
		}
		cl.Topics = append(cl.Topics, ti)
	}
	slices.SortFunc(cl.Topics, func(a, b TopicInfo) int { return cmpString(a.Name, b.Name) })
	b.cluster = cl
	close(b.changed)
	b.changed = make(chan struct{})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// setAdvertised changes the advertised address of broker 1.
func (b *memBroker) setAdvertised(host string, port int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.host, b.port = host, port
	b.rebuildLocked()
}

func (b *memBroker) part(topic string, partition int32) (*memPart, error) {
	t, ok := b.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.parts) {
		return nil, fmt.Errorf("mem: %s/%d: %w", topic, partition, ErrUnknownTopicOrPartition)
	}
	return t.parts[partition], nil
}

func (b *memBroker) Produce(_ context.Context, topic string, partition int32, batches []byte, _ int16) (ProduceResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return ProduceResult{}, err
	}
	split, err := splitBatches(batches)
	if err != nil {
		return ProduceResult{}, err
	}
	first := int64(-1)
	for _, raw := range split {
		pid := int64(binary.BigEndian.Uint64(raw[recordbatch.ProducerIDAt:]))
		seq := int32(binary.BigEndian.Uint32(raw[recordbatch.BaseSequenceAt:]))
		if pid >= 0 {
			if last, ok := p.lastSeq[pid]; ok && seq <= last {
				if first < 0 {
					first = p.lastBase[pid]
				}
				continue
			}
		}
		batch := bytes.Clone(raw)
		binary.BigEndian.PutUint64(batch, uint64(p.end))
		if first < 0 {
			first = p.end
		}
		if pid >= 0 {
			p.lastSeq[pid], p.lastBase[pid] = seq, p.end
		}
		p.batches = append(p.batches, batch)
		p.end += int64(binary.BigEndian.Uint32(raw[recordbatch.LastOffsetDeltaAt:])) + 1
	}
	close(p.notify)
	p.notify = make(chan struct{})
	p.watchers.Notify()
	return ProduceResult{BaseOffset: first, LogAppendTime: -1, LogStartOffset: p.start}, nil
}

// splitBatches checks and splits concatenated RecordBatch v2 (recordbatch.Next).
func splitBatches(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		info, ok, err := recordbatch.Next(b)
		if err != nil || !ok {
			return nil, fmt.Errorf("mem: bad batch (%v): %w", err, ErrCorruptMessage)
		}
		out = append(out, b[:info.Size])
		b = b[info.Size:]
	}
	return out, nil
}

func (b *memBroker) Fetch(_ context.Context, req FetchRequest) (FetchResult, error) {
	b.reads.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(req.Topic, req.Partition)
	if err != nil {
		return FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}, err
	}
	res := FetchResult{HighWatermark: p.end, LastStableOffset: p.end, LogStartOffset: p.start}
	if req.Offset < p.start || req.Offset > p.end {
		return res, fmt.Errorf("mem: offset %d: %w", req.Offset, ErrOffsetOutOfRange)
	}
	if req.NoRecords {
		b.noRecordReads.Add(1)
		res.Pending = req.Offset < p.end
		return res, nil
	}
	var out []byte
	for _, batch := range p.batches {
		base := int64(binary.BigEndian.Uint64(batch))
		last := base + int64(binary.BigEndian.Uint32(batch[23:]))
		if last < req.Offset || base < p.start {
			continue
		}
		if len(out) > 0 && len(out)+len(batch) > req.MaxBytes {
			break
		}
		out = append(out, batch...)
	}
	if len(out) == 0 {
		b.emptyFetches.Add(1)
	}
	b.chunks.Add(1)
	res.Records = &memChunk{b: out, open: &b.chunks, sockets: &b.sockets}
	return res, nil
}

func (b *memBroker) Notify(topic string, partition int32) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return nil
	}
	return p.notify
}

func (b *memBroker) Watch(topic string, partition int32, w *Watch) error {
	b.watches.Add(1)
	if b.watchMisses.Add(-1) >= 0 {
		return fmt.Errorf("mem: %s/%d not applied yet: %w", topic, partition, ErrUnknownTopicOrPartition)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return err
	}
	p.watchers.Attach(w)
	return nil
}

func (b *memBroker) ListOffset(_ context.Context, topic string, partition int32, ts int64, _ int32, _ bool) (int64, int64, int32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return 0, 0, 0, err
	}
	switch ts {
	case -2:
		return p.start, -1, 0, nil
	case -1:
		return p.end, -1, 0, nil
	}
	for _, batch := range p.batches {
		if maxTS := int64(binary.BigEndian.Uint64(batch[35:])); maxTS >= ts {
			return int64(binary.BigEndian.Uint64(batch)), maxTS, 0, nil
		}
	}
	return -1, -1, -1, nil
}

func (b *memBroker) EndOffsetForEpoch(_ context.Context, topic string, partition int32, _, _ int32) (int32, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return 0, 0, err
	}
	return 0, p.end, nil
}

func (b *memBroker) DeleteRecords(_ context.Context, topic string, partition int32, offset int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.part(topic, partition)
	if err != nil {
		return 0, err
	}
	if offset == -1 {
		offset = p.end
	}
	if offset > p.end || offset < 0 {
		return 0, fmt.Errorf("mem: %w", ErrOffsetOutOfRange)
	}
	if offset > p.start {
		p.start = offset
		p.watchers.Notify()
	}
	return p.start, nil
}

func (b *memBroker) CreateTopic(_ context.Context, spec TopicSpec, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !kapi.ValidTopicName(spec.Name) {
		return fmt.Errorf("mem: %q: %w", spec.Name, ErrInvalidTopic)
	}
	if _, ok := b.topics[spec.Name]; ok {
		return fmt.Errorf("mem: %q: %w", spec.Name, ErrTopicExists)
	}
	if spec.Partitions == -1 {
		spec.Partitions = 1
	}
	if spec.Partitions <= 0 || spec.Partitions > 1000 {
		return fmt.Errorf("mem: %d: %w", spec.Partitions, ErrInvalidPartitions)
	}
	if spec.ReplicationFactor != -1 && spec.ReplicationFactor != 1 {
		return fmt.Errorf("mem: %d: %w", spec.ReplicationFactor, ErrInvalidReplicationFactor)
	}
	for k := range spec.Configs {
		if k != "retention.ms" && k != "cleanup.policy" {
			return fmt.Errorf("mem: %q: %w", k, ErrInvalidConfig)
		}
	}
	if validateOnly {
		return nil
	}
	t := &memTopic{configs: spec.Configs}
	copy(t.id[:], spec.Name)
	b.created++
	t.id[14], t.id[15] = byte(b.created>>8), byte(b.created) // a topic created again gets a new id
	b.topics[spec.Name] = t
	b.addPartitionsLocked(t, spec.Partitions)
	b.rebuildLocked()
	return nil
}

func (b *memBroker) addPartitionsLocked(t *memTopic, n int32) {
	for int32(len(t.parts)) < n {
		t.parts = append(t.parts, &memPart{notify: make(chan struct{}),
			lastSeq: make(map[int64]int32), lastBase: make(map[int64]int64)})
	}
}

func (b *memBroker) DeleteTopic(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[name]
	if !ok {
		return fmt.Errorf("mem: %q: %w", name, ErrUnknownTopicOrPartition)
	}
	for _, p := range t.parts {
		p.watchers.Notify()
		close(p.notify)
	}
	delete(b.topics, name)
	b.rebuildLocked()
	return nil
}

func (b *memBroker) CreatePartitions(_ context.Context, topic string, count int32, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok {
		return fmt.Errorf("mem: %q: %w", topic, ErrUnknownTopicOrPartition)
	}
	if int(count) <= len(t.parts) || count > 1000 {
		return fmt.Errorf("mem: %d: %w", count, ErrInvalidPartitions)
	}
	if !validateOnly {
		b.addPartitionsLocked(t, count)
		b.rebuildLocked()
	}
	return nil
}

func (b *memBroker) DescribeConfigs(_ context.Context, res ConfigResource) ([]ConfigEntry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res.Type == ResourceBroker {
		return nil, nil
	}
	t, ok := b.topics[res.Name]
	if !ok {
		return nil, fmt.Errorf("mem: %q: %w", res.Name, ErrUnknownTopicOrPartition)
	}
	var out []ConfigEntry
	for _, name := range []string{"cleanup.policy", "retention.ms"} {
		e := ConfigEntry{Name: name, Source: SourceDefault, Type: 2}
		if v, ok := t.configs[name]; ok {
			e.Value, e.Source = &v, SourceTopic
		} else {
			def := map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000"}[name]
			e.Value = &def
		}
		out = append(out, e)
	}
	return out, nil
}

func (b *memBroker) AlterConfigs(_ context.Context, res ConfigResource, ops []ConfigOp, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[res.Name]
	if !ok || res.Type != ResourceTopic {
		return fmt.Errorf("mem: %q: %w", res.Name, ErrUnknownTopicOrPartition)
	}
	next := make(map[string]string)
	for k, v := range t.configs {
		next[k] = v
	}
	for _, op := range ops {
		if op.Name != "retention.ms" && op.Name != "cleanup.policy" {
			return fmt.Errorf("mem: %q: %w", op.Name, ErrInvalidConfig)
		}
		switch op.Op {
		case OpSet:
			next[op.Name] = *op.Value
		case OpDelete:
			delete(next, op.Name)
		default:
			return fmt.Errorf("mem: op %d: %w", op.Op, ErrInvalidConfig)
		}
	}
	if !validateOnly {
		t.configs = next
	}
	return nil
}

func (b *memBroker) InitProducerID(_ context.Context, txn *string, _ time.Duration, _ int64, _ int16) (int64, int16, error) {
	if txn != nil {
		return -1, -1, ErrTransactionsUnsupported
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextPID++
	return b.nextPID, 0, nil
}

// memChunk is an in-memory Chunk that counts itself open until closed.
type memChunk struct {
	b       []byte
	open    *atomic.Int64
	sockets *atomic.Int64
	closed  bool
}

func (c *memChunk) Len() int { return len(c.b) }

func (c *memChunk) WriteTo(w io.Writer) (int64, error) {
	if _, ok := w.(*net.TCPConn); ok {
		c.sockets.Add(1)
	}
	n, err := w.Write(c.b)
	return int64(n), err
}

func (c *memChunk) Bytes() ([]byte, error) { return c.b, nil }

func (c *memChunk) Close() error {
	if !c.closed {
		c.closed = true
		c.open.Add(-1)
	}
	return nil
}

// memTopicID is the id of b's topic name (zero when there is none).
func memTopicID(b *memBroker, name string) [16]byte {
	cl, _ := b.Cluster()
	if t, ok := cl.Topic(name); ok {
		return t.ID
	}
	return [16]byte{}
}
