package api

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// Series defaults: 10 s buckets over one hour.
const (
	DefaultSeriesInterval = 10 * time.Second
	DefaultSeriesBuckets  = 360
)

// SeriesRing is the in-process ring buffer behind GET /v1/stats/series: per
// topic produced/consumed records and bytes, per group lag, in fixed time
// buckets. The api handlers do not feed it: the server calls AddProduced /
// AddConsumed from its produce and fetch paths (so HTTP and Kafka traffic both
// count) and SetLag from its lag sampler, and serves Series through
// SeriesBackend (a *SeriesRing implements it). Safe for concurrent use; every
// method takes one short lock. Topics and groups idle for a whole window are
// forgotten.
type SeriesRing struct {
	interval time.Duration
	buckets  int64
	now      func() time.Time

	mu     sync.Mutex // guards topics and groups
	topics map[string]*[4]ring
	groups map[string]*ring
}

// ring is one series: slot i holds the value of bucket at[i].
type ring struct {
	at   []int64
	vals []int64
}

// NewSeriesRing makes a ring of buckets buckets of interval each; zero values
// take the defaults, nil now is time.Now.
func NewSeriesRing(interval time.Duration, buckets int, now func() time.Time) *SeriesRing {
	if interval <= 0 {
		interval = DefaultSeriesInterval
	}
	if buckets <= 0 {
		buckets = DefaultSeriesBuckets
	}
	if now == nil {
		now = time.Now
	}
	return &SeriesRing{interval: interval, buckets: int64(buckets), now: now,
		topics: map[string]*[4]ring{}, groups: map[string]*ring{}}
}

func newRing(n int64) ring { return ring{at: make([]int64, n), vals: make([]int64, n)} }

func (s *SeriesRing) bucket() int64 { return s.now().UnixNano() / int64(s.interval) }

// addLocked adds v to the current bucket; set replaces it instead.
func (r *ring) addLocked(b, n, v int64, set bool) {
	i := b % n
	if r.at[i] != b {
		r.at[i], r.vals[i] = b, 0
	}
	if set {
		r.vals[i] = v
	} else {
		r.vals[i] += v
	}
}

// AddProduced counts records and bytes produced to topic now.
func (s *SeriesRing) AddProduced(topic string, records, bytes int64) {
	s.addTopic(topic, 0, records, bytes)
}

// AddConsumed counts records and bytes consumed from topic now.
func (s *SeriesRing) AddConsumed(topic string, records, bytes int64) {
	s.addTopic(topic, 2, records, bytes)
}

func (s *SeriesRing) addTopic(topic string, first int, records, bytes int64) {
	b := s.bucket()
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[topic]
	if !ok {
		t = &[4]ring{newRing(s.buckets), newRing(s.buckets), newRing(s.buckets), newRing(s.buckets)}
		s.topics[topic] = t
	}
	t[first].addLocked(b, s.buckets, records, false)
	t[first+1].addLocked(b, s.buckets, bytes, false)
}

// SetLag records a group's total lag now (the last sample in a bucket wins).
func (s *SeriesRing) SetLag(group string, lag int64) {
	b := s.bucket()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[group]
	if !ok {
		r := newRing(s.buckets)
		g = &r
		s.groups[group] = g
	}
	g.addLocked(b, s.buckets, lag, true)
}

// Series returns the window ending with the current bucket. It implements
// SeriesBackend.
func (s *SeriesRing) Series(context.Context) (Series, error) {
	end := s.bucket()
	start := end - s.buckets + 1
	out := Series{StartMS: time.Duration(start * int64(s.interval)).Milliseconds(),
		IntervalMS: s.interval.Milliseconds(), Topics: []TopicSeries{}, Groups: []GroupSeries{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(s.topics)) {
		t := s.topics[name]
		if !t[0].liveLocked(start) && !t[2].liveLocked(start) {
			delete(s.topics, name)
			continue
		}
		out.Topics = append(out.Topics, TopicSeries{Topic: name,
			ProducedRecords: t[0].windowLocked(start, s.buckets, 0), ProducedBytes: t[1].windowLocked(start, s.buckets, 0),
			ConsumedRecords: t[2].windowLocked(start, s.buckets, 0), ConsumedBytes: t[3].windowLocked(start, s.buckets, 0)})
	}
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		if !g.liveLocked(start) {
			delete(s.groups, name)
			continue
		}
		out.Groups = append(out.Groups, GroupSeries{Group: name, Lag: g.windowLocked(start, s.buckets, -1)})
	}
	return out, nil
}

// ForgetGroup drops a deleted group's series.
func (s *SeriesRing) ForgetGroup(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.groups, group)
}

// ForgetTopic drops a deleted topic's series.
func (s *SeriesRing) ForgetTopic(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.topics, topic)
}

func (r *ring) liveLocked(start int64) bool {
	return slices.ContainsFunc(r.at, func(b int64) bool { return b >= start })
}

// windowLocked returns n values from bucket start; missing buckets are empty.
func (r *ring) windowLocked(start, n, empty int64) []int64 {
	out := make([]int64, n)
	for i := range n {
		b := start + i
		if j := b % n; r.at[j] == b {
			out[i] = r.vals[j]
		} else {
			out[i] = empty
		}
	}
	return out
}
