package quorum

import (
	"errors"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

func topicOf(name string, id byte, n int) *raftfsm.Topic {
	t := &raftfsm.Topic{Name: name, ID: [16]byte{id}}
	for range n {
		t.Partitions = append(t.Partitions, raftfsm.Partition{Replicas: []int32{1}, ISR: []int32{1}})
	}
	return t
}

func onBroker1(n int) [][]int32 {
	as := make([][]int32, n)
	for i := range as {
		as[i] = []int32{1}
	}
	return as
}

// TestReservationsCountWhatTheImageDoesNotHoldYet: a creation applied (in
// the image) whose proposer has not released its reservation yet counts
// once, not twice; one not applied yet still counts. Before, the 20th
// topic of 1,000 partitions under --max-partitions 21,000 was refused with
// two applied creations still reserved (CI's BenchmarkMetadataAllTopics).
func TestReservationsCountWhatTheImageDoesNotHoldYet(t *testing.T) {
	lim := raftfsm.Limits{MaxPartitions: 30, MaxBrokerPartitions: 30}
	var r reservations
	img := &raftfsm.Image{}
	a, err := r.reserve(lim, img, onBroker1(10), "a", [16]byte{1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.reserve(lim, img, onBroker1(10), "b", [16]byte{2}, 10)
	if err != nil {
		t.Fatal(err)
	}
	// a and b applied, neither released yet.
	img = &raftfsm.Image{Topics: raftfsm.TopicMapOf(topicOf("a", 1, 10), topicOf("b", 2, 10))}
	c, err := r.reserve(lim, img, onBroker1(10), "c", [16]byte{3}, 10)
	if err != nil {
		t.Fatalf("10 more with 20 applied under 30: %v", err)
	}
	// c is not applied: it still counts, for the cluster and for broker 1.
	if _, err := r.reserve(lim, img, onBroker1(1), "d", [16]byte{4}, 1); !errors.Is(err, raftfsm.ErrPolicyViolation) {
		t.Fatalf("one more with 20 applied and 10 in flight under 30: %v, want refused", err)
	}
	if _, err := r.reserve(raftfsm.Limits{MaxBrokerPartitions: 30}, img, onBroker1(1), "d", [16]byte{4}, 1); !errors.Is(err, raftfsm.ErrPolicyViolation) {
		t.Fatalf("one more replica on broker 1 holding 30 with the one in flight: %v, want refused", err)
	}
	// A topic of the same name but another id (deleted and made again)
	// does not stand for c.
	img2 := &raftfsm.Image{Topics: img.Topics.With(topicOf("c", 9, 10))}
	if _, err := r.reserve(lim, img2, onBroker1(1), "d", [16]byte{4}, 1); !errors.Is(err, raftfsm.ErrPolicyViolation) {
		t.Fatalf("c's name with another id taken for c: %v, want refused", err)
	}
	// Added partitions count until the topic has them.
	r.release(c)
	grow, err := r.reserve(lim, img, onBroker1(5), "a", [16]byte{1}, 15)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.reserve(lim, img, onBroker1(6), "e", [16]byte{5}, 6); !errors.Is(err, raftfsm.ErrPolicyViolation) {
		t.Fatalf("6 more with 20 applied and 5 added in flight under 30: %v, want refused", err)
	}
	img = &raftfsm.Image{Topics: raftfsm.TopicMapOf(topicOf("a", 1, 15), topicOf("b", 2, 10))}
	if _, err := r.reserve(lim, img, onBroker1(5), "e", [16]byte{5}, 5); err != nil {
		t.Fatalf("5 more with 25 applied (the addition among them) under 30: %v", err)
	}
	for _, res := range []*reservation{a, b, grow} {
		r.release(res)
	}
}
