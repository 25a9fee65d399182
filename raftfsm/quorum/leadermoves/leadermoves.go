// Package leadermoves decides where partition leadership goes when brokers
// change state: the ChangePartitions commands the active controller
// proposes when a broker is fenced, shuts down, reports a storage error or
// comes back (Plan), packed into ChangePartitionsBatch commands (Batch,
// command version 2) as KRaft batches its partition change records, and
// how many leaderships a broker shutting down could still hand over
// (Movable); States summarises what a plan reads of the brokers, and
// Topics lists a command's per-topic changes.
//
// It reads a raftfsm.Image and returns commands; proposing them, and
// deciding when, is package quorum's (its controller loop and controlled
// shutdown). Pure functions: no goroutines, no locks, no I/O.
package leadermoves

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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
		n += 16 + 3*(len(p.Replicas)+len(p.ISR)+len(p.AddingReplicas())+len(p.RemovingReplicas()))
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
	v := newView(img, sick)
	alive := func(id int32) bool { return v.of(id)&isAlive != 0 }
	healthy := func(id int32) bool { return v.of(id)&(isAlive|isSick) == isAlive }
	var out []raftfsm.Command
	var ids idArena
	var changes []raftfsm.ChangePartition // one topic's, reused
	for name, t := range img.Topics.All() {
		changes = changes[:0]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			lf := v.of(p.Leader)
			if p.Leader != -1 && lf&isAlive != 0 && lf&isSick == 0 && !v.anyGone(p.ISR, p.Leader) {
				continue // most partitions, always: nothing to change
			}
			if p.Leader != -1 && lf&(isAlive|isSick) == isAlive|isSick {
				if ch, ok := leaderMove(v, &ids, p, healthy); ok && ch.Leader != -1 {
					ch.Partition = int32(i)
					changes = append(changes, ch)
					continue
				}
			}
			if p.Leader != -1 && lf&isAlive != 0 {
				if ch, ok := isrShrink(v, &ids, p); ok {
					ch.Partition = int32(i)
					changes = append(changes, ch)
				}
				continue
			}
			ch, ok := leaderMove(v, &ids, p, healthy)
			if !ok || ch.Leader == -1 {
				ch, ok = leaderMove(v, &ids, p, alive) // a sick leader beats none
			}
			if ok {
				ch.Partition = int32(i)
				changes = append(changes, ch)
			}
		}
		// The topic's changes in a slice of their own, of their size: one
		// slice for every topic's changes, grown as it went, was most of
		// the active controller's part of a controlled shutdown at
		// 2,000,000 partitions (0.45 of 0.6 s in growing it).
		own := slices.Clone(changes)
		for len(own) > 0 {
			k := min(len(own), MaxPerCommand)
			out = append(out, raftfsm.Command{ChangePartitions: &raftfsm.ChangePartitions{Topic: name, Changes: own[:k:k]}})
			own = own[k:]
		}
	}
	return out
}

// isrShrink drops fenced (or unknown) brokers from the ISR of a partition
// whose leader is alive, as KRaft's controller does when it fences: an
// acks=all write then waits for the session timeout at most, not for the
// leader's replica.lag.time.max. Sick brokers other than the leader leave
// too.
func isrShrink(v *view, ids *idArena, p *raftfsm.Partition) (raftfsm.ChangePartition, bool) {
	if !v.anyGone(p.ISR, p.Leader) {
		return raftfsm.ChangePartition{}, false
	}
	isr := ids.filter(p.ISR, func(id int32) bool { return !v.gone(id, p.Leader) })
	return raftfsm.ChangePartition{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Leader: p.Leader, ISR: isr}, true
}

// leaderMove is the change for one partition whose leader is not alive.
func leaderMove(v *view, ids *idArena, p *raftfsm.Partition, alive func(int32) bool) (raftfsm.ChangePartition, bool) {
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
		isr = ids.filter(p.ISR, alive)
	case p.Leader == -1:
		return raftfsm.ChangePartition{}, false // still no candidate
	case v.of(p.Leader)&isShuttingDown != 0:
		return raftfsm.ChangePartition{}, false
	default:
		isr = ids.filter(p.ISR, func(int32) bool { return true })
	}
	return raftfsm.ChangePartition{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Leader: leader, ISR: isr}, true
}

// Movable counts the partitions broker id leads that have another alive ISR
// member to move to.
func Movable(img *raftfsm.Image, id int32) int {
	v := newView(img, nil)
	count := 0
	for _, t := range img.Topics.All() {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader == id && slices.ContainsFunc(p.ISR, func(r int32) bool { return r != id && v.of(r)&isAlive != 0 }) {
				count++
			}
		}
	}
	return count
}

// Topics is the per-topic changes of a command Plan or Batch made.
func Topics(cmd raftfsm.Command) []raftfsm.ChangePartitions {
	if cmd.ChangePartitions != nil {
		return []raftfsm.ChangePartitions{*cmd.ChangePartitions}
	}
	if cmd.ChangePartitionsBatch != nil {
		return cmd.ChangePartitionsBatch.Topics
	}
	return nil
}

// States summarises what Plan reads of the brokers (ids, epochs, states,
// storage health): with equal summaries and the same partitions it plans
// the same moves.
func States(img *raftfsm.Image, sick map[int32]bool) string {
	var sb strings.Builder
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		b := img.Brokers[id]
		fmt.Fprintf(&sb, "%d/%d/%s/%t;", id, b.Epoch, b.State, sick[id])
	}
	return sb.String()
}
