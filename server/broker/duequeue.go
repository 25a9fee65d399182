package broker

import (
	"container/heap"
	"sync"
)

// dueQueue holds partitions in order of when a periodic loop next has
// work for them (a min-heap of due times, in Unix nanoseconds), so a
// round takes those due instead of asking every open log (issue 19: at
// 300,000 open logs each such walk was a cache miss per log, several
// times a second). The maintenance round (maintenance.go) and the ISR
// round (isrchanges.go) each keep one; what makes a partition due sooner
// than its queued time (a change, new metadata) goes into a set of its
// own that the next round takes whole, so the hot paths never reorder the
// heap.
//
// A partition is in the queue only while admitted (its log open:
// addOpened, removeOpened): set leaves an evicted partition out, so a
// round that rescheduled a partition whose log closed meanwhile cannot
// hold it forever. Its index in the heap is a field of the partition
// (idx), guarded by mu: -1 admitted but not queued, evicted (-2) not
// admitted.
type dueQueue struct {
	mu sync.Mutex
	dueHeap
}

// dueHeap is the queue's heap.Interface (container/heap keeps its order).
type dueHeap struct {
	heap []dueEntry
	idx  func(p *Partition) *int32
}

func (h *dueHeap) Len() int           { return len(h.heap) }
func (h *dueHeap) Less(i, j int) bool { return h.heap[i].at < h.heap[j].at }
func (h *dueHeap) Swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	*h.idx(h.heap[i].p) = int32(i)
	*h.idx(h.heap[j].p) = int32(j)
}

// Push and Pop are heap.Interface's; the queue appends and removes
// entries itself (an entry in an any would be an allocation each).
func (h *dueHeap) Push(x any) {
	e := x.(dueEntry)
	*h.idx(e.p) = int32(len(h.heap))
	h.heap = append(h.heap, e)
}

func (h *dueHeap) Pop() any {
	last := len(h.heap) - 1
	e := h.heap[last]
	h.heap[last] = dueEntry{}
	h.heap = h.heap[:last]
	*h.idx(e.p) = -1
	return e
}

type dueEntry struct {
	at int64 // Unix nanoseconds
	p  *Partition
}

// evicted is the heap index of a partition not admitted to the queue.
const evicted = -2

// admit lets p be queued (its log opened).
func (q *dueQueue) admit(p *Partition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := q.idx(p); *i == evicted {
		*i = -1
	}
}

// evict takes p out of the queue and keeps it out until admitted again.
func (q *dueQueue) evict(p *Partition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(p)
	*q.idx(p) = evicted
}

// set queues p at at (moving it if it is queued); a no-op for an evicted
// partition.
func (q *dueQueue) set(p *Partition, at int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := *q.idx(p)
	switch {
	case i == evicted:
		return
	case i < 0:
		*q.idx(p) = int32(len(q.heap))
		q.heap = append(q.heap, dueEntry{at, p})
		heap.Fix(&q.dueHeap, len(q.heap)-1)
	default:
		q.heap[i].at = at
		heap.Fix(&q.dueHeap, int(i))
	}
}

// unset takes p out of the queue (it stays admitted).
func (q *dueQueue) unset(p *Partition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(p)
}

func (q *dueQueue) removeLocked(p *Partition) {
	i := int(*q.idx(p))
	if i < 0 {
		return
	}
	last := len(q.heap) - 1
	if i != last {
		q.Swap(i, last)
	}
	q.heap[last] = dueEntry{}
	q.heap = q.heap[:last]
	*q.idx(p) = -1
	if i != last {
		heap.Fix(&q.dueHeap, i)
	}
}

// popDue takes out of the queue the partitions due at now (queued at or
// before it), earliest first, at most len(buf) of them, into buf.
func (q *dueQueue) popDue(now int64, buf []*Partition) []*Partition {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := buf[:0]
	for len(out) < cap(buf) && len(q.heap) > 0 && q.heap[0].at <= now {
		p := q.heap[0].p
		q.removeLocked(p)
		out = append(out, p)
	}
	return out
}
