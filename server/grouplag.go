package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api"
)

// Lag sampling: every groupLagSampleEvery the coordinator computes each of
// its groups' lag per topic (log end minus committed offset, summed over
// partitions) for runnel_group_lag{group,topic}, the UI's lag series and
// the list endpoint.

// lagSample is a group's total lag at a sample, with the fingerprint of the
// committed offsets it was computed from.
type lagSample struct {
	total  int64
	commit uint64
}

// commitFingerprint identifies a set of committed offsets (order-free), so a
// sample taken before a commit, a reset or a restart's reload is not served
// for the offsets after it.
func commitFingerprint(offs map[tp]int64) uint64 {
	sum := uint64(len(offs))
	for t, off := range offs {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", t.Topic, t.Partition, off)
		sum += h.Sum64()
	}
	return sum
}

// committedOffsets copies a group's committed offsets under its lock.
func committedOffsets(g *group) (map[tp]int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	offs := make(map[tp]int64, len(g.offsets))
	for t, e := range g.offsets {
		offs[t] = e.Offset
	}
	return offs, g.state == stateDead
}

// lagNow is a group's total lag computed now, with its fingerprint.
func (c *groupCoordinator) lagNow(ctx context.Context, g *group) (lagSample, map[string]int64, bool) {
	offs, dead := committedOffsets(g)
	if dead {
		return lagSample{}, nil, false
	}
	byTopic := map[string]int64{}
	s := lagSample{commit: commitFingerprint(offs)}
	for t, off := range offs {
		res, err := c.read(ctx, t, api.OffsetLatest, 1, 1)
		if err != nil {
			continue
		}
		byTopic[t.Topic] += max(0, res.HighWatermark-off)
	}
	for _, l := range byTopic {
		s.total += l
	}
	return s, byTopic, true
}

// listedLag is the lag the group list shows: the last sample while the
// committed offsets are those it was computed from, else computed now (a
// group not sampled yet, or committed, reset or reloaded since), so the list
// agrees with the group's own page.
func (c *groupCoordinator) listedLag(ctx context.Context, g *group, samples map[string]lagSample) int64 {
	offs, _ := committedOffsets(g)
	if s, ok := samples[g.name]; ok && s.commit == commitFingerprint(offs) {
		return s.total
	}
	s, _, _ := c.lagNow(ctx, g)
	return s.total
}

// sampleLag computes the lag of every group coordinated here.
func (c *groupCoordinator) sampleLag(ctx context.Context) {
	totals := map[string]lagSample{}
	for _, g := range c.snapshot() {
		if ctx.Err() != nil {
			return
		}
		s, byTopic, ok := c.lagNow(ctx, g)
		if !ok {
			continue
		}
		totals[g.name] = s
		c.s.metrics.setGroupLag(g.name, byTopic)
	}
	c.mu.Lock()
	gone := c.lags
	c.lags = totals
	c.mu.Unlock()
	for name := range gone {
		if _, ok := totals[name]; !ok { // deleted, or coordinated elsewhere now
			c.s.metrics.forgetGroupLag(name)
		}
	}
}

// cachedLags are the lags of the last sample.
func (c *groupCoordinator) cachedLags() map[string]lagSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lags
}

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

// setGroupLag records a sample of a group's lag per topic.
func (m *metrics) setGroupLag(group string, byTopic map[string]int64) {
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

// forgetGroupLag drops a deleted group's gauges and series.
func (m *metrics) forgetGroupLag(group string) {
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
func (m *metrics) groupSeriesFrom(first int64) []api.GroupSeries {
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
