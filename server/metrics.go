package server

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api"
)

// metrics are the server's Prometheus collectors plus an in-process ring of
// per-topic rates for the UI charts (no external metrics stack needed).
type metrics struct {
	producedRecords *prometheus.CounterVec
	producedBytes   *prometheus.CounterVec
	consumedRecords *prometheus.CounterVec
	consumedBytes   *prometheus.CounterVec
	// idemReplays counts partition batches answered from an
	// Idempotency-Key (a retry: nothing written); idemkeys.go.
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

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{ring: map[string]*topicRing{}, now: time.Now}
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
			func() float64 {
				if s.broker == nil {
					return 0
				}
				return float64(len(s.broker.AllPartitions()))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "storage_failed_partitions",
			Help: "Partitions of this broker whose disk refuses writes (full, I/O error); they recover by themselves once it takes writes again."},
			func() float64 {
				if s.storage == nil {
					return 0
				}
				return float64(s.storage.Count())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "under_replicated_partitions",
			Help: "Partitions led by this broker whose in-sync replicas are fewer than their replicas."},
			func() float64 { return float64(s.underReplicatedLed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "offline_partitions",
			Help: "Partitions without a leader; reported by the active controller only, 0 elsewhere."},
			func() float64 {
				if s.meta.Status().Role != "leader" {
					return 0
				}
				img, _ := s.meta.Image()
				_, offline := partitionHealth(img)
				return float64(offline)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_term", Help: "Current Raft term."},
			func() float64 { return float64(s.meta.Status().Term) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_commit_index", Help: "Raft commit index."},
			func() float64 { return float64(s.meta.Status().CommitIndex) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_applied_index", Help: "Metadata log index applied by this node."},
			func() float64 { return float64(s.meta.Status().AppliedIndex) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runnel", Name: "raft_is_leader", Help: "1 when this node is the active controller."},
			func() float64 {
				if s.meta.Status().Role == "leader" {
					return 1
				}
				return 0
			}),
	)
	return m
}

func (m *metrics) produced(topic string, records, bytes int) {
	m.producedRecords.WithLabelValues(topic).Add(float64(records))
	m.producedBytes.WithLabelValues(topic).Add(float64(bytes))
	m.add(topic, 0, int64(records), int64(bytes))
}

func (m *metrics) consumed(topic string, records, bytes int) {
	if records == 0 {
		return
	}
	m.consumedRecords.WithLabelValues(topic).Add(float64(records))
	m.consumedBytes.WithLabelValues(topic).Add(float64(bytes))
	m.add(topic, 2, int64(records), int64(bytes))
}

func (m *metrics) add(topic string, kind int, records, bytes int64) {
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

// series returns the last hour in buckets, oldest first.
func (m *metrics) series() api.Series {
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

// forget drops a deleted topic's series and labels.
func (m *metrics) forget(topic string) {
	m.mu.Lock()
	delete(m.ring, topic)
	m.mu.Unlock()
	for _, v := range []*prometheus.CounterVec{m.producedRecords, m.producedBytes, m.consumedRecords, m.consumedBytes, m.idemReplays} {
		v.DeleteLabelValues(topic)
	}
}

// underReplicatedLed counts partitions this broker leads with a short ISR.
func (s *Server) underReplicatedLed() int {
	img, _ := s.meta.Image()
	n := 0
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			if p.Leader == s.cfg.NodeID && len(p.ISR) < len(p.TargetReplicas()) {
				n++
			}
		}
	}
	return n
}
