package raftfsm

import "slices"

// partitionLoad is what placement and the partition limits need to know
// about the whole cluster: how many partitions exist, and how many replicas
// each broker holds and leads. The FSM keeps it in every image it publishes,
// updated by putTopic and deleteTopic with the difference between a topic's
// old and new versions, so that creating a topic costs time in its own
// partitions, not in the cluster's (issue: placement scanned every partition
// for every create, which grew superlinearly with the cluster).
//
// A published image's load is never modified: next copies it.
type partitionLoad struct {
	partitions int64
	replicas   map[int32]int64
	leaders    map[int32]int64
}

// scanLoad counts img's partitions the slow way: for images the FSM did not
// build (tests, restored state before its first command) and to check the
// incremental counts.
func scanLoad(img *Image) *partitionLoad {
	l := &partitionLoad{replicas: map[int32]int64{}, leaders: map[int32]int64{}}
	for _, t := range img.Topics.All() {
		l.add(t, 1)
	}
	return l
}

// add counts t's partitions once more (sign 1) or once less (sign -1).
func (l *partitionLoad) add(t *Topic, sign int64) {
	if t == nil {
		return
	}
	l.partitions += sign * int64(len(t.Partitions))
	for _, p := range t.Partitions {
		l.addPartition(p, sign)
	}
}

// addPartition counts p's leader and replicas once more or once less (not
// the partition itself: a changed partition is removed and added again).
func (l *partitionLoad) addPartition(p Partition, sign int64) {
	l.addLeader(p.Leader, sign)
	l.addReplicas(p.Replicas, sign)
}

// replace counts n instead of o, the same partition changed: a leader
// move changes the leaders alone, which were a third of the map updates
// of each move a controlled shutdown applies; they are summed in leaders,
// which the caller applies once for all the partitions of a change.
func (l *partitionLoad) replace(o, n *Partition, leaders *leaderDeltas) {
	if o.Leader != n.Leader {
		leaders.add(o.Leader, -1)
		leaders.add(n.Leader, 1)
	}
	if !slices.Equal(o.Replicas, n.Replicas) {
		l.addReplicas(o.Replicas, -1)
		l.addReplicas(n.Replicas, 1)
	}
}

// leaderDeltas sums the changes of the partitions each broker leads over
// one change of a topic: a controlled shutdown moves thousands of a
// topic's leaders between the same few brokers, and updating the load's
// map twice per move was a tenth of applying it (BenchmarkChangePartitions).
// The brokers involved are few, so a slice searched in order does.
type leaderDeltas struct {
	ids    []int32
	deltas []int64
}

func (d *leaderDeltas) add(id int32, sign int64) {
	if id < 0 {
		return
	}
	for i, x := range d.ids {
		if x == id {
			d.deltas[i] += sign
			return
		}
	}
	d.ids = append(d.ids, id)
	d.deltas = append(d.deltas, sign)
}

func (d *leaderDeltas) applyTo(l *partitionLoad) {
	for i, id := range d.ids {
		if d.deltas[i] != 0 {
			l.addLeader(id, d.deltas[i])
		}
	}
}

func (l *partitionLoad) addLeader(id int32, n int64) {
	if id < 0 {
		return
	}
	l.leaders[id] += n
	if l.leaders[id] == 0 {
		delete(l.leaders, id)
	}
}

func (l *partitionLoad) addReplicas(ids []int32, sign int64) {
	for _, id := range ids {
		l.replicas[id] += sign
		if l.replicas[id] == 0 {
			delete(l.replicas, id)
		}
	}
}

func (l *partitionLoad) clone() *partitionLoad {
	c := &partitionLoad{partitions: l.partitions, replicas: make(map[int32]int64, len(l.replicas)), leaders: make(map[int32]int64, len(l.leaders))}
	for k, v := range l.replicas {
		c.replicas[k] = v
	}
	for k, v := range l.leaders {
		c.leaders[k] = v
	}
	return c
}

// partitionLoad returns img's counts; callers must not modify them.
func (img *Image) partitionLoad() *partitionLoad {
	if img.load != nil {
		return img.load
	}
	return scanLoad(img)
}
