package txn

import (
	"fmt"
	"sort"
	"sync"

	"github.com/runnel/runnel/kafkaproto"
)

// OffsetStage holds the offsets that TxnOffsetCommit staged in open
// transactions, per producer id and group, on the group's coordinator,
// until a marker for the group's __consumer_offsets partition ends the
// transaction. Safe for concurrent use; its lock is never held while
// calling out.
type OffsetStage struct {
	mu    sync.Mutex
	byPID map[int64]*stagedTxn // guarded by mu
}

type stagedTxn struct {
	epoch  int16
	groups map[string]map[TopicPartition]kafkaproto.CommitOffset
}

// NewOffsetStage returns an empty stage.
func NewOffsetStage() *OffsetStage { return &OffsetStage{byPID: map[int64]*stagedTxn{}} }

// Add stages offsets of group in the transaction of producer pid at epoch
// (a later offset of a partition replaces an earlier one). An epoch older
// than one staged before is PRODUCER_FENCED.
func (s *OffsetStage) Add(pid int64, epoch int16, group string, offsets []kafkaproto.CommitOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byPID[pid]
	switch {
	case ok && epoch < st.epoch:
		return fmt.Errorf("%w: producer %d is at epoch %d, not %d", kafkaproto.ErrProducerFenced, pid, st.epoch, epoch)
	case !ok || epoch > st.epoch:
		// A newer epoch's transaction: what an older one staged was
		// aborted (its marker dropped it, or will find nothing).
		st = &stagedTxn{epoch: epoch, groups: map[string]map[TopicPartition]kafkaproto.CommitOffset{}}
		s.byPID[pid] = st
	}
	g := st.groups[group]
	if g == nil {
		g = map[TopicPartition]kafkaproto.CommitOffset{}
		st.groups[group] = g
	}
	for _, o := range offsets {
		g[o.TopicPartition] = o
	}
	return nil
}

// Complete ends producer pid's staged offsets of the groups for which
// holds is true: with commit, apply is called with each group's offsets
// (sorted) and those applied without error are dropped; without, they are
// dropped. The first apply error is returned (the rest stay staged, for
// the marker's retry).
func (s *OffsetStage) Complete(pid int64, commit bool, holds func(group string) bool,
	apply func(group string, offsets []kafkaproto.CommitOffset) error,
) error {
	s.mu.Lock()
	st, ok := s.byPID[pid]
	var names []string
	taken := map[string]map[TopicPartition]kafkaproto.CommitOffset{}
	if ok {
		for g, offs := range st.groups {
			if holds(g) {
				names = append(names, g)
				taken[g] = offs
				delete(st.groups, g)
			}
		}
		if len(st.groups) == 0 {
			delete(s.byPID, pid)
		}
	}
	s.mu.Unlock()
	if !commit {
		return nil
	}
	sort.Strings(names)
	for i, g := range names {
		if err := apply(g, sortedOffsets(taken[g])); err != nil {
			s.restore(pid, st.epoch, names[i:], taken)
			return err
		}
	}
	return nil
}

// restore puts back offsets whose apply failed (newer ones staged since win).
func (s *OffsetStage) restore(pid int64, epoch int16, names []string, taken map[string]map[TopicPartition]kafkaproto.CommitOffset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byPID[pid]
	if !ok {
		st = &stagedTxn{epoch: epoch, groups: map[string]map[TopicPartition]kafkaproto.CommitOffset{}}
		s.byPID[pid] = st
	}
	for _, g := range names {
		if st.groups[g] == nil {
			st.groups[g] = taken[g]
		}
	}
}

// Pending reports whether an open transaction has staged an offset of
// group for t (an OffsetFetch asking for stable offsets waits for it).
func (s *OffsetStage) Pending(group string, t TopicPartition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.byPID {
		if _, ok := st.groups[group][t]; ok {
			return true
		}
	}
	return false
}

func sortedOffsets(m map[TopicPartition]kafkaproto.CommitOffset) []kafkaproto.CommitOffset {
	out := make([]kafkaproto.CommitOffset, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return cmpTP(out[i].TopicPartition, out[j].TopicPartition) < 0 })
	return out
}
