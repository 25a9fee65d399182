package quorum

import (
	"fmt"
	"sync"

	"github.com/runnel/runnel/raftfsm"
)

// reservations are the partitions of proposals in flight on this (leading)
// node: counted against Limits with the image, so concurrent creations
// cannot overshoot them. Reserved in prepare, released once the command's
// outcome is known.
//
// A command is in the image as soon as it is applied, and its proposer
// releases its reservation only after that, when its answer reaches it:
// between the two the partitions are in both. So a reservation the image
// already shows (its topic, with its id, holding its partitions) is not
// counted again; counting it refused concurrent creations just under
// --max-partitions (BenchmarkMetadataAllTopics in CI: "19000 partitions
// (2000 being created), 1000 more would exceed 21000" for the 20th of 20
// topics of 1,000).
type reservations struct {
	mu       sync.Mutex
	inflight map[*reservation]struct{} // guarded by mu
}

// reservation is one proposal's share; release it exactly once.
type reservation struct {
	partitions int64
	perBroker  map[int32]int64
	// topic, id and count say when the image holds the proposal's
	// partitions: topic (with id when set) has at least count.
	topic string
	id    [16]byte
	count int
}

// appliedIn reports whether img already holds res's partitions.
func (res *reservation) appliedIn(img *raftfsm.Image) bool {
	t, ok := img.Topics.Lookup(res.topic)
	return ok && (res.id == [16]byte{} || t.ID == res.id) && len(t.Partitions) >= res.count
}

// reserve checks that img plus what is in flight plus as fits the limits,
// and reserves as: the new partitions of topic (id: its id when known),
// which has count partitions once the proposal applies.
func (r *reservations) reserve(l raftfsm.Limits, img *raftfsm.Image, as [][]int32, topic string, id [16]byte, count int) (*reservation, error) {
	res := &reservation{partitions: int64(len(as)), perBroker: map[int32]int64{}, topic: topic, id: id, count: count}
	for _, reps := range as {
		for _, bid := range reps {
			res.perBroker[bid]++
		}
	}
	if l.MaxPartitions <= 0 && l.MaxBrokerPartitions <= 0 {
		return nil, nil
	}
	total, perBroker := raftfsm.ImageLoad(img)
	r.mu.Lock()
	defer r.mu.Unlock()
	var pending int64
	pendingPer := map[int32]int64{}
	for other := range r.inflight {
		if other.appliedIn(img) {
			continue
		}
		pending += other.partitions
		for bid, n := range other.perBroker {
			pendingPer[bid] += n
		}
	}
	if l.MaxPartitions > 0 && total+pending+res.partitions > l.MaxPartitions {
		return nil, fmt.Errorf("%w: the cluster has %d partitions (%d being created), %d more would exceed --max-partitions %d",
			raftfsm.ErrPolicyViolation, total, pending, res.partitions, l.MaxPartitions)
	}
	if l.MaxBrokerPartitions > 0 {
		for bid, n := range res.perBroker {
			if have := perBroker[bid] + pendingPer[bid]; have+n > l.MaxBrokerPartitions {
				return nil, fmt.Errorf("%w: broker %d holds %d partition replicas, %d more would exceed --max-broker-partitions %d",
					raftfsm.ErrPolicyViolation, bid, have, n, l.MaxBrokerPartitions)
			}
		}
	}
	if r.inflight == nil {
		r.inflight = map[*reservation]struct{}{}
	}
	r.inflight[res] = struct{}{}
	return res, nil
}

// release gives a reservation back; nil is a no-op.
func (r *reservations) release(res *reservation) {
	if res == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, res)
}
