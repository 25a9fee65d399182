package kafkadoor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/broker"

	"github.com/runnel/runnel/recordbatch"
)

// fakeMeta is the metadata node with a fixed image.
type fakeMeta struct {
	img    *raftfsm.Image
	leader int32
}

func (m *fakeMeta) Image() (*raftfsm.Image, <-chan struct{}) { return m.img, nil }
func (m *fakeMeta) Status() raftfsm.Status                   { return raftfsm.Status{LeaderID: m.leader} }
func (m *fakeMeta) ControllerStatuses(context.Context) []raftfsm.Status {
	return nil
}
func (m *fakeMeta) BrokerLiveness(context.Context) (map[int32]raftfsm.Liveness, error) {
	return nil, nil
}
func (m *fakeMeta) Apply(context.Context, raftfsm.Command) (any, error) { return nil, nil }
func (m *fakeMeta) CatchUp(context.Context) error                       { return nil }

// The Kafka view of the metadata image: fenced brokers and brokers without
// a Kafka listener are left out, a fenced broker's replicas are offline,
// internal topics are marked, everything sorted; one conversion per image.
func TestClusterFromImage(t *testing.T) {
	img := &raftfsm.Image{ClusterID: "c1",
		Brokers: map[int32]*raftfsm.Broker{
			3: {ID: 3, State: raftfsm.BrokerAlive, KafkaAddr: "h3:9092", Rack: "r3"},
			1: {ID: 1, State: raftfsm.BrokerAlive, KafkaAddr: "h1:9092", KafkaTLSAddr: "h1:9093"},
			2: {ID: 2, State: raftfsm.BrokerFenced, KafkaAddr: "h2:9092"},
			4: {ID: 4, State: raftfsm.BrokerAlive}, // no Kafka listener
		},
		Topics: raftfsm.TopicMapOf(
			&raftfsm.Topic{Name: "zeta", Partitions: []raftfsm.Partition{{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}}},
			&raftfsm.Topic{Name: "__consumer_offsets", Partitions: []raftfsm.Partition{{Leader: 3, Replicas: []int32{3}, ISR: []int32{3}}}},
		),
	}
	meta := &fakeMeta{img: img, leader: 3}
	k := New(Config{NodeID: 1, Meta: meta})
	c, _ := k.Cluster()
	if c.ClusterID != "c1" || c.ControllerID != 3 || c.Self != 1 {
		t.Fatalf("cluster %+v", c)
	}
	if len(c.Brokers) != 2 || c.Brokers[0].ID != 1 || c.Brokers[1].ID != 3 {
		t.Fatalf("brokers %+v, want 1 and 3", c.Brokers)
	}
	if b := c.Brokers[0]; b.Host != "h1" || b.Port != 9092 || b.SSLHost != "h1" || b.SSLPort != 9093 {
		t.Fatalf("broker 1 %+v", b)
	}
	if c.Brokers[1].Rack != "r3" || c.Brokers[1].SSLPort != 0 {
		t.Fatalf("broker 3 %+v", c.Brokers[1])
	}
	if len(c.Topics) != 2 || c.Topics[0].Name != "__consumer_offsets" || !c.Topics[0].Internal || c.Topics[1].Internal {
		t.Fatalf("topics %+v", c.Topics)
	}
	if p := c.Topics[1].Partitions[0]; p.Leader != 1 || p.LeaderEpoch != 2 || fmt.Sprint(p.Offline) != "[2]" {
		t.Fatalf("zeta-0 %+v", p)
	}
	if again, _ := k.Cluster(); again != c {
		t.Error("the same image was converted twice")
	}
	// Partitions with one offline replica share its array; one with two
	// has its own, and appending to one never shows in another.
	img5 := *img
	img5.Brokers = maps.Clone(img.Brokers)
	img5.Brokers[5] = &raftfsm.Broker{ID: 5, State: raftfsm.BrokerFenced}
	img5.Topics = raftfsm.TopicMapOf(&raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{
		{Leader: 1, Replicas: []int32{1, 2}}, {Leader: 1, Replicas: []int32{2, 1, 5}}, {Leader: 1, Replicas: []int32{1, 2}}, {Leader: 1, Replicas: []int32{5, 1}},
	}})
	meta.img = &img5
	c5, _ := k.Cluster()
	ps := c5.Topics[0].Partitions
	ps[0].Offline = append(ps[0].Offline, 9)
	if got := fmt.Sprint(ps[0].Offline, ps[1].Offline, ps[2].Offline, ps[3].Offline); got != "[2 9] [2 5] [2] [5]" {
		t.Fatalf("offline replicas %s", got)
	}
	meta.img = &raftfsm.Image{ClusterID: "c2"}
	if next, _ := k.Cluster(); next == c || next.ClusterID != "c2" {
		t.Errorf("a new image kept the old view: %+v", next)
	}
}

// The one error table: each package's sentinel becomes the listener's, and
// the original error stays reachable; what the table does not name goes as is.
func TestToKafka(t *testing.T) {
	for _, c := range []struct{ from, want error }{
		{broker.ErrNotLeader, kafkaproto.ErrNotLeader},
		{raftfsm.ErrTopicExists, kafkaproto.ErrTopicExists},
		{admin.ErrInternalTopic, kafkaproto.ErrInvalidTopic},
		{admin.ErrElectionNotNeeded, kafkaproto.ErrElectionNotNeeded},
		{recordbatch.ErrCorruptBatch, kafkaproto.ErrCorruptMessage},
		{context.DeadlineExceeded, kafkaproto.ErrRequestTimedOut},
	} {
		err := toKafka(fmt.Errorf("op: %w", c.from))
		if !errors.Is(err, c.want) || !errors.Is(err, c.from) {
			t.Errorf("%v -> %v, want %v wrapping it", c.from, err, c.want)
		}
	}
	other := errors.New("other")
	if toKafka(other) != other || toKafka(nil) != nil {
		t.Error("an error the table does not name changed")
	}
}

// The view after each change equals a fresh conversion of the new image,
// while a topic the change left alone keeps its previous conversion: a
// changed, an added and a deleted topic, then a fenced broker (which marks
// replicas offline in every topic, so nothing may be kept).
func TestClusterReconvertsOnlyChangedTopics(t *testing.T) {
	brokers := func(fenced int32) map[int32]*raftfsm.Broker {
		m := map[int32]*raftfsm.Broker{}
		for id := int32(1); id <= 3; id++ {
			st := raftfsm.BrokerAlive
			if id == fenced {
				st = raftfsm.BrokerFenced
			}
			m[id] = &raftfsm.Broker{ID: id, State: st, KafkaAddr: fmt.Sprintf("h%d:9092", id)}
		}
		return m
	}
	topic := func(name string, epoch int32) *raftfsm.Topic {
		return &raftfsm.Topic{Name: name, ID: [16]byte{name[0]}, Partitions: []raftfsm.Partition{
			{Leader: 1, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			{Leader: 2, LeaderEpoch: epoch, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}},
		}}
	}
	a, b, c := topic("a", 1), topic("b", 1), topic("c", 1)
	meta := &fakeMeta{img: &raftfsm.Image{ClusterID: "x", Brokers: brokers(0), Topics: raftfsm.TopicMapOf(a, b, c)}}
	k := New(Config{NodeID: 1, Meta: meta})
	first, _ := k.Cluster()
	kept := &first.Topics[0].Partitions[0] // topic a's conversion

	steps := []struct {
		name string
		next func(img raftfsm.Image) raftfsm.Image
		keep bool // topic a's conversion is kept
	}{
		{"b changed", func(img raftfsm.Image) raftfsm.Image { img.Topics = img.Topics.With(topic("b", 2)); return img }, true},
		{"d added", func(img raftfsm.Image) raftfsm.Image { img.Topics = img.Topics.With(topic("d", 1)); return img }, true},
		{"c deleted", func(img raftfsm.Image) raftfsm.Image { img.Topics = img.Topics.Without("c"); return img }, true},
		{"broker 3 fenced", func(img raftfsm.Image) raftfsm.Image { img.Brokers = brokers(3); return img }, false},
	}
	for _, st := range steps {
		next := st.next(*meta.img)
		meta.img = &next
		got, _ := k.Cluster()
		want, _ := New(Config{NodeID: 1, Meta: meta}).Cluster()
		if !reflect.DeepEqual(got.Topics, want.Topics) {
			t.Fatalf("%s: topics\n%+v\nwant\n%+v", st.name, got.Topics, want.Topics)
		}
		if again, _ := k.Cluster(); again != got {
			t.Fatalf("%s: converted twice for one image", st.name)
		}
		if reused := &got.Topics[0].Partitions[0] == kept; reused != st.keep {
			t.Fatalf("%s: topic a's conversion kept = %v, want %v", st.name, reused, st.keep)
		}
	}
}
