package broker

import "sync"

// openLogs is the set of hosted partitions whose log is open: what the
// periodic loops (maintenance, ISR, storage) look at. Once every hosted
// log of a node is open (300,000 after the first write to each, issue 19),
// each loop copied the whole set into a new slice every round (a map of
// 300,000 into 2.4 MB, several times a second): the set is a slice of
// slots instead, a removed partition's slot reused by the next one added,
// and each walks it a chunk at a time (each), holding the lock only to
// copy a chunk. Slots never move, so a walk sees every partition that was
// in the set for the whole walk, once.
//
// The same structure holds the logs changed since their last maintenance
// (Broker.changed, maintenance.go) and the failed ones (Broker.failed,
// storage.go), with another slot field of the partition: slot says which.
type openLogs struct {
	mu    sync.Mutex
	slots []*Partition // nil: a free slot
	free  []int32      // free slots, reused first
	n     int          // partitions in the set
	// slot is p's field holding its slot in this set (-1: not in it),
	// guarded by mu; nil: Partition.openSlot.
	slot func(p *Partition) *int32
}

func (s *openLogs) slotOf(p *Partition) *int32 {
	if s.slot == nil {
		return &p.openSlot
	}
	return s.slot(p)
}

// openChunk is how many partitions a walk copies under the lock at a time.
const openChunk = 256

// add puts p in the set (again: a no-op).
func (s *openLogs) add(p *Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(p)
}

func (s *openLogs) addLocked(p *Partition) {
	slot := s.slotOf(p)
	if *slot >= 0 {
		return
	}
	var i int32
	if k := len(s.free); k > 0 {
		i, s.free = s.free[k-1], s.free[:k-1]
	} else {
		i = int32(len(s.slots))
		s.slots = append(s.slots, nil)
	}
	s.slots[i] = p
	*slot = i
	s.n++
}

// remove takes p out of the set (a no-op if it is not in it).
func (s *openLogs) remove(p *Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(p)
}

func (s *openLogs) removeLocked(p *Partition) {
	slot := s.slotOf(p)
	i := *slot
	if i < 0 {
		return
	}
	s.slots[i] = nil
	s.free = append(s.free, i)
	*slot = -1
	s.n--
}

// has reports whether p is in the set.
func (s *openLogs) has(p *Partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.slotOf(p) >= 0
}

// len is the number of partitions in the set.
func (s *openLogs) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// each calls fn with each partition in the set, without the set's lock
// held, until fn returns false. A partition added meanwhile may or may
// not be seen; one removed meanwhile may still be.
func (s *openLogs) each(fn func(*Partition) bool) {
	var buf [openChunk]*Partition
	for from, done := 0, false; !done; {
		s.mu.Lock()
		k := 0
		for ; from < len(s.slots) && k < len(buf); from++ {
			if p := s.slots[from]; p != nil {
				buf[k] = p
				k++
			}
		}
		done = from >= len(s.slots)
		s.mu.Unlock()
		for _, p := range buf[:k] {
			if !fn(p) {
				return
			}
		}
		clear(buf[:k])
	}
}

// take empties the set and returns what it held, calling taken with each
// partition under the set's lock (which clears a flag saying it is in
// the set): one added again meanwhile is in the set for the next take,
// not in what this one returns. The lock is held a chunk at a time. The
// slice is made for what the set holds when it starts: grown by append,
// a take of 300,000 partitions allocated 16 MB for a 2.4 MB answer
// (BenchmarkOpenLogsTake; issue 19: after a burst writing to every
// partition, each maintenance and ISR round took them all).
func (s *openLogs) take(taken func(*Partition)) []*Partition {
	var out []*Partition
	for from := 0; ; {
		s.mu.Lock()
		if out == nil && s.n > 0 {
			out = make([]*Partition, 0, s.n)
		}
		for k := 0; from < len(s.slots) && k < openChunk; from++ {
			if p := s.slots[from]; p != nil {
				s.removeLocked(p)
				taken(p)
				out = append(out, p)
				k++
			}
		}
		done := from >= len(s.slots)
		s.mu.Unlock()
		if done {
			return out
		}
	}
}

// snapshot is the partitions in the set now, in a new slice: for the
// tests, and the rare caller that needs them all at once.
func (s *openLogs) snapshot() []*Partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Partition, 0, s.n)
	for _, p := range s.slots {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
