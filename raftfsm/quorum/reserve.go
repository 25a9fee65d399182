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
type reservations struct {
	mu         sync.Mutex
	partitions int64           // guarded by mu
	perBroker  map[int32]int64 // guarded by mu
}

// reservation is one proposal's share; release it exactly once.
type reservation struct {
	partitions int64
	perBroker  map[int32]int64
}

// reserve checks that img plus what is in flight plus as fits the limits,
// and reserves as.
func (r *reservations) reserve(l raftfsm.Limits, img *raftfsm.Image, as [][]int32) (*reservation, error) {
	res := &reservation{partitions: int64(len(as)), perBroker: map[int32]int64{}}
	for _, reps := range as {
		for _, id := range reps {
			res.perBroker[id]++
		}
	}
	if l.MaxPartitions <= 0 && l.MaxBrokerPartitions <= 0 {
		return nil, nil
	}
	total, perBroker := raftfsm.ImageLoad(img)
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.MaxPartitions > 0 && total+r.partitions+res.partitions > l.MaxPartitions {
		return nil, fmt.Errorf("%w: the cluster has %d partitions (%d being created), %d more would exceed --max-partitions %d",
			raftfsm.ErrPolicyViolation, total, r.partitions, res.partitions, l.MaxPartitions)
	}
	if l.MaxBrokerPartitions > 0 {
		for id, n := range res.perBroker {
			if have := perBroker[id] + r.perBroker[id]; have+n > l.MaxBrokerPartitions {
				return nil, fmt.Errorf("%w: broker %d holds %d partition replicas, %d more would exceed --max-broker-partitions %d",
					raftfsm.ErrPolicyViolation, id, have, n, l.MaxBrokerPartitions)
			}
		}
	}
	if r.perBroker == nil {
		r.perBroker = map[int32]int64{}
	}
	r.partitions += res.partitions
	for id, n := range res.perBroker {
		r.perBroker[id] += n
	}
	return res, nil
}

// release gives a reservation back; nil is a no-op.
func (r *reservations) release(res *reservation) {
	if res == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitions -= res.partitions
	for id, n := range res.perBroker {
		if r.perBroker[id] -= n; r.perBroker[id] == 0 {
			delete(r.perBroker, id)
		}
	}
}
