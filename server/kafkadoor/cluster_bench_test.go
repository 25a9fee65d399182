package kafkadoor

import (
	"fmt"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// BenchmarkClusterAfterOneTopicChange: the Kafka door's view of the
// metadata after a change to one topic (a leader move, an ISR change) in
// an image of 100 topics of 1,000 partitions with replication factor 3.
// Every such change publishes an image, and the door's view is asked for
// by Metadata requests and by the leader hints of NOT_LEADER answers,
// which a failover makes many of at once. fenced: broker 3 is fenced, so
// every partition has an offline replica (after a kill -9).
func BenchmarkClusterAfterOneTopicChange(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) { benchClusterAfterOneTopicChange(b, fenced) })
	}
}

func benchClusterAfterOneTopicChange(b *testing.B, fenced bool) {
	brokers := map[int32]*raftfsm.Broker{}
	for id := int32(1); id <= 3; id++ {
		brokers[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerAlive, KafkaAddr: fmt.Sprintf("h%d:9092", id)}
	}
	if fenced {
		brokers[3].State = raftfsm.BrokerFenced
	}
	var topics []*raftfsm.Topic
	for i := range 100 {
		t := &raftfsm.Topic{Name: fmt.Sprintf("topic-%03d", i), ID: [16]byte{byte(i), 1}}
		for p := range 1000 {
			l := int32(p%3 + 1)
			r := []int32{l, l%3 + 1, (l+1)%3 + 1}
			t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: l, LeaderEpoch: 1, Replicas: r, ISR: r})
		}
		topics = append(topics, t)
	}
	img := &raftfsm.Image{ClusterID: "c", Brokers: brokers, Topics: raftfsm.TopicMapOf(topics...)}
	meta := &fakeMeta{img: img, leader: 1}
	k := New(Config{NodeID: 1, Meta: meta})
	k.Cluster()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		old := topics[i%len(topics)]
		moved := *old
		moved.Partitions = append([]raftfsm.Partition(nil), old.Partitions...)
		moved.Partitions[i%1000].LeaderEpoch++
		next := *meta.img
		next.Topics = next.Topics.With(&moved)
		meta.img = &next
		if c, _ := k.Cluster(); len(c.Topics) != len(topics) {
			b.Fatalf("%d topics", len(c.Topics))
		}
	}
}
