package admin

import "github.com/runnel/runnel/raftfsm"

// threeBrokers is brokers 1, 2 and 3: those in alive alive, the others
// fenced.
func threeBrokers(alive ...int32) map[int32]*raftfsm.Broker {
	m := map[int32]*raftfsm.Broker{}
	for _, id := range []int32{1, 2, 3} {
		m[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerFenced}
	}
	for _, id := range alive {
		m[id].State = raftfsm.BrokerAlive
	}
	return m
}

// onThree is a partition on brokers 1, 2 and 3 (1 preferred) led by
// leader with isr in sync, at leader epoch 4 and partition epoch 9.
func onThree(leader int32, isr ...int32) raftfsm.Partition {
	return raftfsm.Partition{Leader: leader, Replicas: []int32{1, 2, 3}, ISR: isr, LeaderEpoch: 4, PartitionEpoch: 9}
}

// oneTopic is an image of brokers and topic "t" of the one partition p,
// allowing unclean leader elections when unclean says so.
func oneTopic(brokers map[int32]*raftfsm.Broker, p raftfsm.Partition, unclean bool) (*raftfsm.Image, *raftfsm.Topic) {
	topic := &raftfsm.Topic{Name: "t", Partitions: []raftfsm.Partition{p}, Configs: map[string]string{}}
	if unclean {
		topic.Configs["unclean.leader.election.enable"] = "true"
	}
	return &raftfsm.Image{Brokers: brokers, Topics: raftfsm.TopicMapOf(topic)}, topic
}
