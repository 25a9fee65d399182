package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/raftfsm"
)

type fakeMeta struct{ img *raftfsm.Image }

func (m fakeMeta) Image() (*raftfsm.Image, <-chan struct{}) { return m.img, nil }
func (m fakeMeta) Status() raftfsm.Status                   { return raftfsm.Status{Role: "leader", Term: 7} }

// The UI's series in-process: counts land in their 10 s bucket, the hour
// slides (a bucket an hour old is reused, not added to), a deleted topic
// and group go; and the node's gauges read the image when scraped.
func TestSeriesAndGauges(t *testing.T) {
	img := &raftfsm.Image{Topics: raftfsm.TopicMapOf(
		&raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{
			{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, // led here, under-replicated
			{Leader: -1, Replicas: []int32{2}, ISR: []int32{2}},   // offline
		}})}
	reg := prometheus.NewRegistry()
	m := New(reg, Node{ID: 1, Meta: fakeMeta{img}, Partitions: func() int { return 2 }, StorageFailed: func() int { return 0 }})
	now := time.UnixMilli(1_000_000_000_000)
	m.now = func() time.Time { return now }

	m.Produced("t", 3, 300)
	m.Consumed("t", 2, 200)
	m.Consumed("t", 0, 50) // nothing read: not counted
	now = now.Add(seriesBucket)
	m.Produced("t", 1, 100)
	m.SetGroupLag("g", map[string]int64{"t": 5})
	s := m.Series()
	last := seriesBuckets - 1
	if len(s.Topics) != 1 || s.Topics[0].ProducedRecords[last-1] != 3 || s.Topics[0].ConsumedBytes[last-1] != 200 ||
		s.Topics[0].ProducedRecords[last] != 1 {
		t.Fatalf("series %+v", s.Topics)
	}
	if len(s.Groups) != 1 || s.Groups[0].Lag[last] != 5 || s.Groups[0].Lag[last-1] != -1 {
		t.Fatalf("group series %+v", s.Groups)
	}
	// An hour later the same slots hold new buckets: the old counts are gone.
	now = now.Add(seriesBuckets * seriesBucket)
	m.Produced("t", 7, 700)
	if s := m.Series(); s.Topics[0].ProducedRecords[last] != 7 || s.Topics[0].ProducedRecords[last-1] != 0 {
		t.Fatalf("after an hour %+v", s.Topics[0].ProducedRecords[last-1:])
	}
	if c := counter(t, reg, "runnel_topic_produced_records_total"); c != 11 {
		t.Errorf("runnel_topic_produced_records_total %v, want 11", c)
	}
	m.Forget("t")
	m.ForgetGroupLag("g")
	if s := m.Series(); len(s.Topics) != 0 || len(s.Groups) != 0 {
		t.Fatalf("after forget %+v", s)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.Metric) == 1 && mf.Metric[0].GetGauge() != nil {
			got[mf.GetName()] = mf.Metric[0].GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"runnel_under_replicated_partitions": 1, "runnel_offline_partitions": 1,
		"runnel_partitions": 2, "runnel_raft_term": 7, "runnel_raft_is_leader": 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

// counter is the value of a one-series counter in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	return -1
}
