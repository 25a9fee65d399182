package kafkadoor

import (
	"context"
	"errors"
	"fmt"
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
