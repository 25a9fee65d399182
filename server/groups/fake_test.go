package groups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
)

// fakeBackend is an in-memory broker for the coordinator: a metadata image
// the test edits, offsets partitions held as record slices, appends that can
// be failed or held.
type fakeBackend struct {
	mu      sync.Mutex
	img     *raftfsm.Image
	changed chan struct{} // closed when img is replaced
	logs    map[int32]*fakeLog

	appendErr  error         // returned by Append while set
	appendGate chan struct{} // when set, Append waits for it to close (or ctx)
	appending  chan struct{} // receives one value as each Append starts
	appended   chan struct{} // closed and replaced after each Append
	appends    int
	data       map[TopicPartition][]api.ConsumedRecord // Read's records
}

func newFakeBackend(nodeID int32, partitions int) *fakeBackend {
	b := &fakeBackend{changed: make(chan struct{}), logs: map[int32]*fakeLog{},
		appending: make(chan struct{}, 64), appended: make(chan struct{})}
	t := &raftfsm.Topic{Name: OffsetsTopic}
	for i := 0; i < partitions; i++ {
		t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: nodeID, LeaderEpoch: 1})
		b.logs[int32(i)] = newFakeLog()
	}
	b.img = &raftfsm.Image{Topics: raftfsm.TopicMapOf(t,
		&raftfsm.Topic{Name: "orders", Partitions: make([]raftfsm.Partition, 2)}),
		Brokers: map[int32]*raftfsm.Broker{nodeID: {ID: nodeID, State: raftfsm.BrokerAlive}}}
	return b
}

// setLeader publishes an image where offsets partition p is led by leader.
func (b *fakeBackend) setLeader(p int32, leader, epoch int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	img := *b.img
	t := *b.img.Topics.Get(OffsetsTopic)
	t.Partitions = append([]raftfsm.Partition(nil), t.Partitions...)
	t.Partitions[p] = raftfsm.Partition{Leader: leader, LeaderEpoch: epoch}
	img.Topics = img.Topics.With(&t)
	b.img = &img
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *fakeBackend) Image() (*raftfsm.Image, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.img, b.changed
}

func (b *fakeBackend) CreateTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) error {
	return fmt.Errorf("%w: %s", raftfsm.ErrTopicExists, name)
}

func (b *fakeBackend) Append(ctx context.Context, p int32, recs []Record) error {
	b.mu.Lock()
	gate, log := b.appendGate, b.logs[p]
	b.mu.Unlock()
	b.appending <- struct{}{}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer func() {
		b.appends++
		close(b.appended)
		b.appended = make(chan struct{})
	}()
	if b.appendErr != nil {
		return b.appendErr
	}
	if log == nil {
		return errors.New("fake: no such partition")
	}
	log.append(recs)
	return nil
}

// waitAppends waits until n appends have completed (written or failed).
func (b *fakeBackend) waitAppends(t *testing.T, n int) {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		done, ch := b.appends, b.appended
		b.mu.Unlock()
		if done >= n {
			return
		}
		select {
		case <-ch:
		case <-guard:
			t.Fatalf("%d appends done, want %d", done, n)
		}
	}
}

func (b *fakeBackend) OffsetsLog(p int32) (Log, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.logs[p]; ok {
		return l, nil
	}
	return nil, errors.New("fake: no such partition")
}

// Read serves the records of data[t] (offsets 0..n-1); a partition without
// data is empty at offset 100.
func (b *fakeBackend) Read(ctx context.Context, t TopicPartition, offset int64, maxRecords, maxBytes int, _ bool) (api.ConsumeResult, error) {
	b.mu.Lock()
	recs, ok := b.data[t]
	b.mu.Unlock()
	if !ok {
		return api.ConsumeResult{HighWatermark: 100, NextOffset: 100}, nil
	}
	end := int64(len(recs))
	switch offset {
	case api.OffsetEarliest:
		offset = 0
	case api.OffsetLatest:
		offset = end
	}
	if offset < 0 || offset > end {
		return api.ConsumeResult{}, fmt.Errorf("%w: %d", api.ErrOffsetOutOfRange, offset)
	}
	out := api.ConsumeResult{HighWatermark: end, NextOffset: offset}
	for _, r := range recs[offset:min(end, offset+int64(maxRecords))] {
		out.Records = append(out.Records, r)
		out.NextOffset = r.Offset + 1
	}
	return out, nil
}

// produce adds n records to partition p of topic in data.
func (b *fakeBackend) produce(topic string, p int32, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		b.data = map[TopicPartition][]api.ConsumedRecord{}
	}
	t := TopicPartition{Topic: topic, Partition: p}
	for range n {
		off := int64(len(b.data[t]))
		b.data[t] = append(b.data[t], api.ConsumedRecord{Partition: p, Offset: off, Value: []byte(fmt.Sprintf("%s-%d-%d", topic, p, off))})
	}
}

func (b *fakeBackend) OffsetForTime(ctx context.Context, t TopicPartition, ts, end int64) (int64, error) {
	return end, nil
}

func (b *fakeBackend) SetGroupLag(group string, byTopic map[string]int64) {}
func (b *fakeBackend) ForgetGroupLag(group string)                        {}
func (b *fakeBackend) Consumed(topic string, records, bytes int)          {}

// fakeLog is one offsets partition in memory; its high watermark follows
// its end unless held.
type fakeLog struct {
	mu       sync.Mutex
	recs     []Record
	held     bool  // the high watermark stays at hwm
	hwm      int64 // when held
	changed  chan struct{}
	hwmCalls chan struct{} // receives one value at each HighWatermark call
}

func newFakeLog() *fakeLog {
	return &fakeLog{changed: make(chan struct{}), hwmCalls: make(chan struct{}, 1)}
}

func (l *fakeLog) append(recs []Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		r.Offset = int64(len(l.recs))
		l.recs = append(l.recs, r)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// hold keeps the high watermark at hwm until release.
func (l *fakeLog) hold(hwm int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.hwm = true, hwm
}

func (l *fakeLog) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *fakeLog) StartOffset() int64 { return 0 }

func (l *fakeLog) EndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.recs))
}

func (l *fakeLog) HighWatermark() int64 {
	select {
	case l.hwmCalls <- struct{}{}:
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return l.hwm
	}
	return int64(len(l.recs))
}

func (l *fakeLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *fakeLog) ReadRecords(offset int64, maxRecords, maxBytes int) ([]Record, int64, int64, error) {
	hwm := l.HighWatermark()
	l.mu.Lock()
	defer l.mu.Unlock()
	end := min(hwm, offset+int64(maxRecords))
	out := append([]Record(nil), l.recs[offset:end]...)
	return out, end, hwm, nil
}

func (l *fakeLog) BatchEnd(offset int64) (int64, error) { return offset + 1, nil }

// records returns a copy of what was appended.
func (l *fakeLog) records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.recs...)
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
