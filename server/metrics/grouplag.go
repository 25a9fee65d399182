package metrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api"
)

// runnel_group_lag and the UI's lag series, fed by the group coordinator's
// lag sampler (groups.Backend's SetGroupLag and ForgetGroupLag).

// groupLagSeries holds each group's total lag per series bucket (the value
// of the last sample in the bucket). Its own mutex guards it.
type groupLagSeries struct {
	mu     sync.Mutex
	groups map[string]*[seriesBuckets][2]int64 // slot -> {bucket, lag}
	topics map[string]map[string]bool          // group -> topics with a gauge
}

func newGroupLagGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "runnel", Name: "group_lag",
		Help: "Records a consumer group is behind the log end, summed over the topic's partitions (sampled every 10s by the group's coordinator)."},
		[]string{"group", "topic"})
	reg.MustRegister(g)
	return g
}

// SetGroupLag records a sample of a group's lag per topic.
func (m *Metrics) SetGroupLag(group string, byTopic map[string]int64) {
	var total int64
	for topic, l := range byTopic {
		m.groupLag.WithLabelValues(group, topic).Set(float64(l))
		total += l
	}
	b := m.now().UnixMilli() / seriesBucket.Milliseconds()
	s := &m.groupSeries
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups, s.topics = map[string]*[seriesBuckets][2]int64{}, map[string]map[string]bool{}
	}
	for topic := range s.topics[group] {
		if _, ok := byTopic[topic]; !ok {
			m.groupLag.DeleteLabelValues(group, topic)
		}
	}
	s.topics[group] = map[string]bool{}
	for topic := range byTopic {
		s.topics[group][topic] = true
	}
	r, ok := s.groups[group]
	if !ok {
		r = &[seriesBuckets][2]int64{}
		s.groups[group] = r
	}
	r[b%seriesBuckets] = [2]int64{b, total}
}

// ForgetGroupLag drops a deleted group's gauges and series.
func (m *Metrics) ForgetGroupLag(group string) {
	s := &m.groupSeries
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic := range s.topics[group] {
		m.groupLag.DeleteLabelValues(group, topic)
	}
	delete(s.topics, group)
	delete(s.groups, group)
}

// groupSeriesFrom returns every group's lag per bucket from bucket first
// on, -1 where no sample fell.
func (m *Metrics) groupSeriesFrom(first int64) []api.GroupSeries {
	s := &m.groupSeries
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []api.GroupSeries{}
	for name, r := range s.groups {
		gs := api.GroupSeries{Group: name, Lag: make([]int64, seriesBuckets)}
		for i := int64(0); i < seriesBuckets; i++ {
			b := first + i
			if v := r[b%seriesBuckets]; v[0] == b {
				gs.Lag[i] = v[1]
			} else {
				gs.Lag[i] = -1
			}
		}
		out = append(out, gs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}
