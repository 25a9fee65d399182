// Package leadermoves decides where partition leadership goes when brokers
// change state: the ChangePartitions commands the active controller
// proposes when a broker is fenced, shuts down, reports a storage error or
// comes back (Plan), packed into ChangePartitionsBatch commands (Batch,
// command version 2) as KRaft batches its partition change records, and
// how many leaderships a broker shutting down could still hand over
// (Movable).
//
// It reads a raftfsm.Image and returns commands; proposing them, and
// deciding when, is package quorum's (its controller loop and controlled
// shutdown). Pure functions: no goroutines, no locks, no I/O.
package leadermoves

import (
	"slices"

	"github.com/runnel/runnel/raftfsm"
)

// MaxPerCommand keeps a ChangePartitions command well under
// quorum's maxCommandBytes (a change encodes to about 100 bytes).
const MaxPerCommand = 4096

// Bounds of one ChangePartitionsBatch: its changes (about 10 bytes each
// in the binary envelope, so well under quorum's maxCommandBytes), and the stored
// bytes of the topics it rewrites, which the FSM commits in one badger
// transaction with the command (at most 2.4 MiB, see raftfsm.OpenBadger).
const (
	maxBatchMoves      = 32 << 10
	maxBatchTopicBytes = 1 << 20
)

// Batch packs Plan's per-topic commands into
// ChangePartitionsBatch commands (command version 2), as KRaft batches its
// partition change records: a controlled shutdown at 2,000,000 partitions
// is then a few dozen raft entries, not one per topic.
func Batch(img *raftfsm.Image, cmds []raftfsm.Command) []raftfsm.Command {
	var out []raftfsm.Command
	var cur *raftfsm.ChangePartitionsBatch
	moves, bytes := 0, 0
	for _, c := range cmds {
		cp := *c.ChangePartitions
		size := 0
		if cur == nil || cur.Topics[len(cur.Topics)-1].Topic != cp.Topic {
			size = storedTopicBytes(img.Topics.Get(cp.Topic)) // counted once per topic
		}
		if cur != nil && (moves+len(cp.Changes) > maxBatchMoves || bytes+size > maxBatchTopicBytes) {
			out = append(out, raftfsm.Command{ChangePartitionsBatch: cur})
			cur = nil
			size = storedTopicBytes(img.Topics.Get(cp.Topic))
		}
		if cur == nil {
			cur, moves, bytes = &raftfsm.ChangePartitionsBatch{}, 0, 0
		}
		cur.Topics = append(cur.Topics, cp)
		moves, bytes = moves+len(cp.Changes), bytes+size
	}
	if cur != nil {
		out = append(out, raftfsm.Command{ChangePartitionsBatch: cur})
	}
	return out
}

// storedTopicBytes overestimates a topic's stored binary size (raftfsm's
// topicbinary.go): a partition's three integers and four replica lists
// take up to 5 bytes per varint, 2 for the small ones usual here.
func storedTopicBytes(t *raftfsm.Topic) int {
	if t == nil {
		return 0
	}
	n := 64 + len(t.Name)
	for k, v := range t.Configs {
		n += 10 + len(k) + len(v)
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		n += 16 + 3*(len(p.Replicas)+len(p.ISR)+len(p.AddingReplicas)+len(p.RemovingReplicas))
	}
	return n
}

// Plan lists the ChangePartitions commands that package quorum's reconcile proposes,
// in topic order. A partition led by a broker that is not alive moves to the
// first replica, in replica order, that is in the ISR and alive; the ISR
// keeps its alive members. Without such a replica, a partition led by a
// fenced (or unknown) broker goes offline (leader -1, ISR kept); one led by
// a broker shutting down stays put. An offline partition gets the first
// alive ISR member as leader. A partition whose leader is alive loses its
// fenced ISR members.
//
// Brokers in sick report a storage error (their logs refuse writes, e.g. a
// full disk): they lead only where no other alive ISR member can, and leave
// the ISR of partitions led by another broker, so they hold no high
// watermark back. They come back as followers once their storage recovers.
func Plan(img *raftfsm.Image, sick map[int32]bool) []raftfsm.Command {
	alive := func(id int32) bool {
		b, ok := img.Brokers[id]
		return ok && b.State == raftfsm.BrokerAlive
	}
	healthy := func(id int32) bool { return alive(id) && !sick[id] }
	var out []raftfsm.Command
	// One slice for every topic's changes (each command holds a clipped
	// part of it): a slice per topic grown from nil was a quarter of a
	// controlled shutdown's CPU at 2,000,000 partitions.
	var all []raftfsm.ChangePartition
	for name, t := range img.Topics.All() {
		start := len(all)
		changes := all // appended to below; all takes it back
		for i, p := range t.Partitions {
			if p.Leader != -1 && sick[p.Leader] && alive(p.Leader) {
				if ch, ok := leaderMove(img, p, healthy); ok && ch.Leader != -1 {
					ch.Partition = int32(i)
					changes = append(changes, ch)
					continue
				}
			}
			if p.Leader != -1 && alive(p.Leader) {
				if ch, ok := isrShrink(img, p, sick); ok {
					ch.Partition = int32(i)
					changes = append(changes, ch)
				}
				continue
			}
			ch, ok := leaderMove(img, p, healthy)
			if !ok || ch.Leader == -1 {
				ch, ok = leaderMove(img, p, alive) // a sick leader beats none
			}
			if ok {
				ch.Partition = int32(i)
				changes = append(changes, ch)
			}
		}
		all = changes
		changes = all[start:len(all):len(all)]
		for len(changes) > 0 {
			k := min(len(changes), MaxPerCommand)
			out = append(out, raftfsm.Command{ChangePartitions: &raftfsm.ChangePartitions{Topic: name, Changes: changes[:k]}})
			changes = changes[k:]
		}
	}
	return out
}

// isrShrink drops fenced (or unknown) brokers from the ISR of a partition
// whose leader is alive, as KRaft's controller does when it fences: an
// acks=all write then waits for the session timeout at most, not for the
// leader's replica.lag.time.max.
func isrShrink(img *raftfsm.Image, p raftfsm.Partition, sick map[int32]bool) (raftfsm.ChangePartition, bool) {
	gone := func(id int32) bool {
		b, ok := img.Brokers[id]
		return !ok || b.State == raftfsm.BrokerFenced || (sick[id] && id != p.Leader)
	}
	if !slices.ContainsFunc(p.ISR, gone) {
		return raftfsm.ChangePartition{}, false
	}
	isr := slices.DeleteFunc(slices.Clone(p.ISR), gone)
	return raftfsm.ChangePartition{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Leader: p.Leader, ISR: isr}, true
}

// leaderMove is the change for one partition whose leader is not alive.
func leaderMove(img *raftfsm.Image, p raftfsm.Partition, alive func(int32) bool) (raftfsm.ChangePartition, bool) {
	leader := int32(-1)
	for _, r := range p.Replicas {
		if alive(r) && slices.Contains(p.ISR, r) {
			leader = r
			break
		}
	}
	var isr []int32
	switch {
	case leader != -1:
		isr = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !alive(id) })
	case p.Leader == -1:
		return raftfsm.ChangePartition{}, false // still no candidate
	case img.Brokers[p.Leader] != nil && img.Brokers[p.Leader].State == raftfsm.BrokerShuttingDown:
		return raftfsm.ChangePartition{}, false
	default:
		isr = slices.Clone(p.ISR)
	}
	return raftfsm.ChangePartition{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Leader: leader, ISR: isr}, true
}

// Movable counts the partitions broker id leads that have another alive ISR
// member to move to.
func Movable(img *raftfsm.Image, id int32) int {
	alive := func(r int32) bool {
		b, ok := img.Brokers[r]
		return ok && b.State == raftfsm.BrokerAlive && r != id
	}
	count := 0
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions {
			if p.Leader == id && slices.ContainsFunc(p.ISR, alive) {
				count++
			}
		}
	}
	return count
}
