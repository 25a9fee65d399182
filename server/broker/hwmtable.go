package broker

import (
	"maps"
	"slices"

	"github.com/runnel/runnel/server/broker/hwcheckpoint"
)

// markTable is what the high-watermark checkpoint holds, kept in the
// order the file lists it (hwmcheckpoint.go): per topic name, a slot per
// partition index, and the names sorted again only when a topic came or
// went. A write walks it in order: with 300,000 marks (issue 19) each
// write used to gather the open logs and the saved marks into a new
// slice, with a map of the open ones, and sort it all.
type markTable struct {
	topics map[string]*topicMarks
	names  []string // sorted; nil once a topic came or went
	n      int      // slots in use, of all topics
}

// topicMarks is the slots of one topic name, by partition index.
type topicMarks struct {
	slots []markSlot
	used  int
}

// markSlot is one partition's entry: the current mark of its open log,
// else the mark saved for it.
type markSlot struct {
	open     *Partition
	saved    savedMark
	hasSaved bool
}

func (s *markSlot) inUse() bool { return s.open != nil || s.hasSaved }

func newMarkTable() *markTable { return &markTable{topics: map[string]*topicMarks{}} }

// get is k's slot, nil if it has none.
func (t *markTable) get(k partKey) *markSlot {
	tm := t.topics[k.topic]
	if tm == nil || int(k.index) >= len(tm.slots) {
		return nil
	}
	return &tm.slots[k.index]
}

// update applies f to k's slot (made for it) and keeps the counts.
func (t *markTable) update(k partKey, f func(*markSlot)) {
	tm := t.topics[k.topic]
	if tm == nil {
		tm = &topicMarks{}
		t.topics[k.topic] = tm
		t.names = nil
	}
	if i := int(k.index); i >= len(tm.slots) {
		tm.slots = append(tm.slots, make([]markSlot, i+1-len(tm.slots))...)
	}
	s := &tm.slots[k.index]
	was := s.inUse()
	f(s)
	switch now := s.inUse(); {
	case now && !was:
		tm.used++
		t.n++
	case was && !now:
		tm.used--
		t.n--
	}
	if tm.used == 0 {
		delete(t.topics, k.topic)
		t.names = nil
	}
}

// each calls fn with every slot in use, in the file's order.
func (t *markTable) each(fn func(k partKey, s *markSlot)) {
	if t.names == nil {
		t.names = slices.Sorted(maps.Keys(t.topics))
	}
	for _, name := range t.names {
		tm := t.topics[name]
		for i := range tm.slots {
			if s := &tm.slots[i]; s.inUse() {
				fn(partKey{name, int32(i)}, s)
			}
		}
	}
}

// checkpoint is the table as the file holds it: each open log's mark now,
// the saved one of the others, a topic's partitions in index order and
// its run of one topic id as one entry (a name whose topic was deleted
// and created again may hold both ids for a while).
func (t *markTable) checkpoint() hwcheckpoint.Checkpoint {
	var b checkpointBufs
	return t.checkpointInto(&b)
}

// checkpointBufs is the memory a checkpoint is built in, kept by its
// writer between writes (hwmCheckpoint.bufs): the topics and, in one
// array, every topic's partitions. A write of 300,000 marks made both
// anew each round (issue 19: 73 MB in 40 s after a kill -9).
type checkpointBufs struct {
	topics hwcheckpoint.Checkpoint
	parts  []hwcheckpoint.Partition
	file   []byte // the encoded file (hwmcheckpoint.go)
}

// checkpointInto is checkpoint built in b's memory: what it returns
// holds b's arrays, valid until b is used again.
func (t *markTable) checkpointInto(b *checkpointBufs) hwcheckpoint.Checkpoint {
	cp := b.topics[:0]
	parts := slices.Grow(b.parts[:0], t.n) // every topic's, in one array: never grown below
	start := 0
	t.each(func(k partKey, s *markSlot) {
		m := s.saved
		if s.open != nil {
			m = savedMark{s.open.topicID, s.open.hwm.Load()}
		}
		if n := len(cp); n == 0 || cp[n-1].Name != k.topic || cp[n-1].ID != m.id {
			if n > 0 {
				cp[n-1].Partitions = parts[start:len(parts):len(parts)]
			}
			cp = append(cp, hwcheckpoint.Topic{Name: k.topic, ID: m.id})
			start = len(parts)
		}
		parts = append(parts, hwcheckpoint.Partition{Index: k.index, HighWatermark: m.hw})
	})
	if n := len(cp); n > 0 {
		cp[n-1].Partitions = parts[start:len(parts):len(parts)]
	}
	b.topics, b.parts = cp, parts
	return cp
}
