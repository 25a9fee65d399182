package leadermoves

import "github.com/runnel/runnel/raftfsm"

// flags is what Plan needs to know of a broker.
type flags uint8

const (
	isKnown flags = 1 << iota // registered
	isAlive
	isShuttingDown
	isFenced
	isSick // its heartbeats report a storage error
)

// denseIDs bounds the broker ids a view keeps in its slice (others, if
// any, in its map): node ids are small in practice.
const denseIDs = 1 << 16

// view is the brokers' flags, looked up for every partition: a slice
// indexed by id rather than the image's map, whose lookups (several per
// partition) were most of the scan of 2,000,000 partitions that found
// nothing to move.
type view struct {
	dense  []flags
	sparse map[int32]flags
}

func newView(img *raftfsm.Image, sick map[int32]bool) *view {
	top := int32(-1)
	for id := range img.Brokers {
		if id < denseIDs {
			top = max(top, id)
		}
	}
	for id, s := range sick {
		if s && id < denseIDs {
			top = max(top, id)
		}
	}
	v := &view{dense: make([]flags, top+1)}
	for id, b := range img.Brokers {
		f := isKnown
		switch b.State {
		case raftfsm.BrokerAlive:
			f |= isAlive
		case raftfsm.BrokerShuttingDown:
			f |= isShuttingDown
		case raftfsm.BrokerFenced:
			f |= isFenced
		}
		v.set(id, f)
	}
	for id, s := range sick {
		if s {
			v.set(id, isSick)
		}
	}
	return v
}

func (v *view) set(id int32, f flags) {
	if id >= 0 && int(id) < len(v.dense) {
		v.dense[id] |= f
		return
	}
	if v.sparse == nil {
		v.sparse = map[int32]flags{}
	}
	v.sparse[id] |= f
}

// of is id's flags; none for an unknown broker (or -1, no leader).
func (v *view) of(id int32) flags {
	if id >= 0 && int(id) < len(v.dense) {
		return v.dense[id]
	}
	return v.sparse[id]
}

// gone: id does not belong in the ISR of a partition led by leader: it is
// fenced or unknown, or sick and not the leader.
func (v *view) gone(id, leader int32) bool {
	f := v.of(id)
	return f&isKnown == 0 || f&isFenced != 0 || (f&isSick != 0 && id != leader)
}

func (v *view) anyGone(isr []int32, leader int32) bool {
	for _, id := range isr {
		if v.gone(id, leader) {
			return true
		}
	}
	return false
}

// idArena hands out the moves' ISRs from shared blocks: one allocation
// per few thousand moves, not one per move.
type idArena struct{ block []int32 }

// filter is a new list of the ids in isr that keep accepts, in order.
func (a *idArena) filter(isr []int32, keep func(int32) bool) []int32 {
	n := 0
	for _, id := range isr {
		if keep(id) {
			n++
		}
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]int32, 0, max(4096, n))
	}
	start := len(a.block)
	for _, id := range isr {
		if keep(id) {
			a.block = append(a.block, id)
		}
	}
	return a.block[start:len(a.block):len(a.block)]
}
