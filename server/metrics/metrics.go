// Package metrics is the node's Prometheus collectors (runnel_*) plus an
// in-process ring of per-topic rates and per-group lag for the UI charts
// (no external metrics stack needed): the last hour in 10 s buckets. Both
// doors count what they produce and serve through it; the group
// coordinator feeds the lag samples. The node's gauges (partitions, ISR
// health, raft) are read from Node when Prometheus scrapes.
//
// Goroutines: none. Lock order: Metrics.mu and groupLagSeries.mu are
// leaves, never held together.
package metrics

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
)

// Metadata is the metadata node the gauges read; quorum.Node implements it.
type Metadata interface {
	Image() (*raftfsm.Image, <-chan struct{})
	Status() raftfsm.Status
}

// Node is what the gauges read when scraped.
type Node struct {
	ID   int32
	Meta Metadata
	// Partitions counts the replicas this broker hosts (0 on a
	// controller-only node); StorageFailed those whose disk refuses writes.
	Partitions, StorageFailed func() int
}

// Metrics are the node's collectors and series. Safe for concurrent use.
type Metrics struct {
	producedRecords *prometheus.CounterVec
	producedBytes   *prometheus.CounterVec
	consumedRecords *prometheus.CounterVec
	consumedBytes   *prometheus.CounterVec
	// idemReplays counts partition batches answered from an
	// Idempotency-Key (a retry: nothing written); server/broker/producers/keys.go.
	idemReplays *prometheus.CounterVec

	mu   sync.Mutex
	ring map[string]*topicRing // guarded by mu
	now  func() time.Time

	groupLag    *prometheus.GaugeVec // runnel_group_lag{group,topic}; metrics_grouplag.go
	groupSeries groupLagSeries
}

const (
	seriesBucket  = 10 * time.Second
	seriesBuckets = 360 // one hour
)

// topicRing holds counts per bucket; slot = bucket number % seriesBuckets.
type topicRing struct {
	bucket [seriesBuckets]int64 // the bucket number each slot holds
	counts [seriesBuckets][4]int64
}

// New registers the collectors on reg.
func New(reg prometheus.Registerer, n Node) *Metrics {
	m := &Metrics{ring: map[string]*topicRing{}, now: time.Now}
	vec := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "runnel", Name: name, Help: help}, []string{"topic"})
		reg.MustRegister(c)
		return c
	}
	m.producedRecords = vec("topic_produced_records_total", "Records appended, by topic, over HTTP and Kafka.")
	m.producedBytes = vec("topic_produced_bytes_total", "Record batch bytes appended, by topic.")
	m.consumedRecords = vec("topic_consumed_records_total", "Records read by consumers, by topic.")
	m.consumedBytes = vec("topic_consumed_bytes_total", "Bytes read by consumers, by topic.")
	m.idemReplays = vec("idempotent_replays_total", "HTTP produce batches answered from their Idempotency-Key (retries: nothing written), by topic.")
	m.groupLag = newGroupLagGauge(reg)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "partitions", Help: "Partition replicas hosted by this broker."},
			func() float64 { return float64(n.Partitions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "storage_failed_partitions",
			Help: "Partitions of this broker whose disk refuses writes (full, I/O error); they recover by themselves once it takes writes again."},
			func() float64 { return float64(n.StorageFailed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "under_replicated_partitions",
			Help: "Partitions led by this broker whose in-sync replicas are fewer than their replicas."},
			func() float64 { return float64(underReplicatedLed(n)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "offline_partitions",
			Help: "Partitions without a leader; reported by the active controller only, 0 elsewhere."},
			func() float64 {
				if n.Meta.Status().Role != "leader" {
					return 0
				}
				img, _ := n.Meta.Image()
				_, offline := PartitionHealth(img)
				return float64(offline)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_term", Help: "Current Raft term."},
			func() float64 { return float64(n.Meta.Status().Term) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_commit_index", Help: "Raft commit index."},
			func() float64 { return float64(n.Meta.Status().CommitIndex) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_applied_index", Help: "Metadata log index applied by this node."},
			func() float64 { return float64(n.Meta.Status().AppliedIndex) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_is_leader", Help: "1 when this node is the active controller."},
			func() float64 {
				if n.Meta.Status().Role == "leader" {
					return 1
				}
				return 0
			}),
	)
	return m
}

// Produced counts records appended to topic over either door.
func (m *Metrics) Produced(topic string, records, bytes int) {
	m.producedRecords.WithLabelValues(topic).Add(float64(records))
	m.producedBytes.WithLabelValues(topic).Add(float64(bytes))
	m.add(topic, 0, int64(records), int64(bytes))
}

// Consumed counts records read from topic by consumers.
func (m *Metrics) Consumed(topic string, records, bytes int) {
	if records == 0 {
		return
	}
	m.consumedRecords.WithLabelValues(topic).Add(float64(records))
	m.consumedBytes.WithLabelValues(topic).Add(float64(bytes))
	m.add(topic, 2, int64(records), int64(bytes))
}

func (m *Metrics) add(topic string, kind int, records, bytes int64) {
	b := m.now().UnixMilli() / seriesBucket.Milliseconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.ring[topic]
	if !ok {
		r = &topicRing{}
		m.ring[topic] = r
	}
	slot := b % seriesBuckets
	if r.bucket[slot] != b {
		r.bucket[slot], r.counts[slot] = b, [4]int64{}
	}
	r.counts[slot][kind] += records
	r.counts[slot][kind+1] += bytes
}

// Series returns the last hour in buckets, oldest first.
func (m *Metrics) Series() api.Series {
	last := m.now().UnixMilli() / seriesBucket.Milliseconds()
	first := last - seriesBuckets + 1
	out := api.Series{StartMS: first * seriesBucket.Milliseconds(), IntervalMS: seriesBucket.Milliseconds(),
		Topics: []api.TopicSeries{}, Groups: []api.GroupSeries{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	for topic, r := range m.ring {
		ts := api.TopicSeries{Topic: topic,
			ProducedRecords: make([]int64, seriesBuckets), ProducedBytes: make([]int64, seriesBuckets),
			ConsumedRecords: make([]int64, seriesBuckets), ConsumedBytes: make([]int64, seriesBuckets)}
		for i := int64(0); i < seriesBuckets; i++ {
			b := first + i
			slot := b % seriesBuckets
			if r.bucket[slot] != b {
				continue
			}
			c := r.counts[slot]
			ts.ProducedRecords[i], ts.ProducedBytes[i] = c[0], c[1]
			ts.ConsumedRecords[i], ts.ConsumedBytes[i] = c[2], c[3]
		}
		out.Topics = append(out.Topics, ts)
	}
	sort.Slice(out.Topics, func(i, j int) bool { return out.Topics[i].Topic < out.Topics[j].Topic })
	out.Groups = m.groupSeriesFrom(first)
	return out
}

// Forget drops a deleted topic's series and labels.
func (m *Metrics) Forget(topic string) {
	m.mu.Lock()
	delete(m.ring, topic)
	m.mu.Unlock()
	for _, v := range []*prometheus.CounterVec{m.producedRecords, m.producedBytes, m.consumedRecords, m.consumedBytes, m.idemReplays} {
		v.DeleteLabelValues(topic)
	}
}

// IdempotentReplay counts a partition batch answered from its
// Idempotency-Key (a retry: nothing written).
func (m *Metrics) IdempotentReplay(topic string) { m.idemReplays.WithLabelValues(topic).Inc() }

// underReplicatedLed counts partitions this broker leads with a short ISR.
func underReplicatedLed(node Node) int {
	img, _ := node.Meta.Image()
	n := 0
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			if p.Leader == node.ID && len(p.ISR) < len(p.TargetReplicas()) {
				n++
			}
		}
	}
	return n
}

// PartitionHealth counts under-replicated and offline partitions.
func PartitionHealth(img *raftfsm.Image) (under, offline int) {
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				offline++
			}
			if len(p.ISR) < len(p.TargetReplicas()) {
				under++ // replicas being added by a reassignment don't count
			}
		}
	}
	return under, offline
}
