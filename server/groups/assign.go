package groups

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The "consumer" protocol's metadata and assignment blobs, and the range
// assignor the coordinator runs when the group's leader is an HTTP member.

// decodeSubscription returns the topics of a consumer-protocol subscription
// (nil when it does not decode).
func decodeSubscription(meta []byte) []string {
	var m kmsg.ConsumerMemberMetadata
	if len(meta) == 0 || m.ReadFrom(meta) != nil {
		return nil
	}
	return m.Topics
}

// assignedTopic is one topic's partitions in an assignment.
type assignedTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// decodeAssignment returns a consumer-protocol assignment, sorted by topic.
func decodeAssignment(b []byte) []assignedTopic {
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return nil
	}
	out := make([]assignedTopic, 0, len(a.Topics))
	for _, t := range a.Topics {
		ps := append([]int32(nil), t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, assignedTopic{Topic: t.Topic, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

func encodeAssignment(ts []assignedTopic) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, t := range ts {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t.Topic, t.Partitions
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// encodeSubscription is a v1 subscription (topics and owned partitions).
func encodeSubscription(topics []string, owned []assignedTopic) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 1, topics
	for _, o := range owned {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = o.Topic, o.Partitions
		m.OwnedPartitions = append(m.OwnedPartitions, op)
	}
	return m.AppendTo(nil)
}

// assignRangeLocked is Kafka's range assignor: per topic, the members
// subscribed to it (sorted by id) get consecutive partition ranges, the
// first ones one extra when the count does not divide.
func (g *group) assignRangeLocked() map[string][]byte {
	img, _ := g.c.b.Image()
	byTopic := map[string][]string{}
	for _, id := range g.sortedMemberIDsLocked() {
		m := g.members[id]
		topics := decodeSubscription(m.metadataFor(g.protocol))
		if m.http != nil {
			topics = m.http.topics
		}
		for _, t := range topics {
			byTopic[t] = append(byTopic[t], id)
		}
	}
	plan := map[string][]assignedTopic{}
	for topic, ids := range byTopic {
		t, ok := img.Topics.Lookup(topic)
		if !ok {
			continue
		}
		n := len(t.Partitions)
		per, extra := n/len(ids), n%len(ids)
		next := 0
		for i, id := range ids {
			count := per
			if i < extra {
				count++
			}
			if count == 0 {
				continue
			}
			ps := make([]int32, count)
			for j := range ps {
				ps[j] = int32(next + j)
			}
			next += count
			plan[id] = append(plan[id], assignedTopic{Topic: topic, Partitions: ps})
		}
	}
	out := map[string][]byte{}
	for id := range g.members {
		ts := plan[id]
		sort.Slice(ts, func(i, j int) bool { return ts[i].Topic < ts[j].Topic })
		out[id] = encodeAssignment(ts)
	}
	return out
}
