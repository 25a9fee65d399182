package admin

import (
	"context"
	"fmt"
	"sync"

	"github.com/runnel/runnel/raftfsm"
)

// producerIDBlock is how many producer ids a broker takes from the
// controller at once, as Kafka's brokers do (AllocateProducerIds, 1000): a
// client calling InitProducerId in a loop costs one metadata-log entry per
// block, not one per call. Ids of a block are allocated (below the image's
// NextProducerID) before they are handed out, so produce's allocation
// check holds for them.
const producerIDBlock = 1000

// producerIDs hands out producer ids from this broker's current block.
// Safe for concurrent use; the lock is not held while a block is fetched.
type producerIDs struct {
	mu        sync.Mutex // guards next and end
	next, end int64      // the unused ids [next, end) of the current block
}

// AllocateProducerID returns a producer id no other producer was given.
func (a *Admin) AllocateProducerID(ctx context.Context) (int64, error) {
	ids := &a.ids
	ids.mu.Lock()
	if ids.next < ids.end {
		id := ids.next
		ids.next++
		ids.mu.Unlock()
		return id, nil
	}
	ids.mu.Unlock()
	res, err := a.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: producerIDBlock}})
	if err != nil {
		return 0, fmt.Errorf("allocate producer id: %w", err)
	}
	first := res.(int64)
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.next >= ids.end {
		// Callers that raced for a block keep only the first to land;
		// the rest of the others' blocks is never handed out.
		ids.next, ids.end = first+1, first+producerIDBlock
	}
	return first, nil
}
