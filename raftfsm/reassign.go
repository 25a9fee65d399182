package raftfsm

import (
	"fmt"
	"slices"
)

// Online partition reassignment (Kafka's KIP-455, simplified). Starting one
// makes the partition's Replicas the target followed by the original
// replicas not in it, and records which replicas are being added and
// removed. The new replicas replicate from the leader like any follower and
// join the ISR once caught up. The partition change that puts the last
// target replica in the ISR completes the reassignment in the same command
// (as KRaft's controller does; Replicas = target, which drops the removed
// replicas), so a new active controller has nothing left to finish. The
// operator can cancel it instead (Replicas = the original replicas).

// ReassignAction is what a ReassignPartition does.
type ReassignAction string

const (
	ReassignStart  ReassignAction = "start"
	ReassignCancel ReassignAction = "cancel"
)

// ReassignPartition starts or cancels a partition's reassignment. Result:
// *Partition, the partition after the command.
//
//   - start: Target is the new replica set: distinct known brokers, as many
//     as the topic's replication factor. Starting again with the target in
//     progress changes nothing; another target replaces it (the original
//     replicas stay the ones before the first start). A target whose
//     replicas are all in the ISR already (a reorder, say) completes at once.
//   - cancel: Replicas becomes the original replicas again (as Kafka does,
//     in their order in Replicas: the target's order for the ones the target
//     kept), the ISR keeps its original members, and a leader being dropped
//     hands over to the first of them in the ISR (alive ones first). Without
//     a reassignment in progress: ErrNoReassignment, so a replayed or
//     repeated cancel changes nothing.
//
// Completion needs no command: the ChangePartition(s) that puts the last
// target replica in the ISR completes it (see completeIfCaughtUp). Every
// change bumps the partition epoch; a leader change bumps the leader epoch.
type ReassignPartition struct {
	Topic     string
	Partition int32
	Action    ReassignAction
	Target    []int32 `json:",omitempty"`
}

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas()) > 0 || len(p.RemovingReplicas()) > 0
}

// AddingReplicas are the replicas a running reassignment adds (nil when
// none runs).
func (p Partition) AddingReplicas() []int32 {
	if p.Reassignment == nil {
		return nil
	}
	return p.Reassignment.Adding
}

// RemovingReplicas are the replicas a running reassignment removes (nil
// when none runs).
func (p Partition) RemovingReplicas() []int32 {
	if p.Reassignment == nil {
		return nil
	}
	return p.Reassignment.Removing
}

// newReassignment is the Reassignment of adding and removing, or nil when
// both are nil.
func newReassignment(adding, removing []int32) *Reassignment {
	if adding == nil && removing == nil {
		return nil
	}
	return &Reassignment{Adding: adding, Removing: removing}
}

// TargetReplicas is the replica set p is being reassigned to, or its
// replicas when no reassignment runs.
func (p Partition) TargetReplicas() []int32 {
	return without(p.Replicas, p.RemovingReplicas())
}

// originalReplicas is the replica set before the reassignment started.
func (p Partition) originalReplicas() []int32 {
	return without(p.Replicas, p.AddingReplicas())
}

func (c *change) reassignPartition(cmd *ReassignPartition) (any, error) {
	t, err := c.topic(cmd.Topic)
	if err != nil {
		return nil, err
	}
	if cmd.Partition < 0 || int(cmd.Partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %q/%d", ErrUnknownPartition, cmd.Topic, cmd.Partition)
	}
	cur := t.Partitions[cmd.Partition]
	var next Partition
	switch cmd.Action {
	case ReassignStart:
		next, err = c.startReassignment(t, cur, cmd.Target)
	case ReassignCancel:
		next, err = c.cancelReassignment(cur)
	default:
		err = fmt.Errorf("%w: reassign action %q", ErrInvalidCommand, cmd.Action)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%q/%d)", err, cmd.Topic, cmd.Partition)
	}
	if samePlacement(cur, next) {
		res := cur.clone()
		return &res, nil
	}
	next.PartitionEpoch++
	if next.Leader != cur.Leader {
		next.LeaderEpoch++
	}
	t = t.clone()
	t.Partitions[cmd.Partition] = next
	c.putTopic(t)
	res := next.clone()
	return &res, nil
}

func (c *change) startReassignment(t *Topic, cur Partition, target []int32) (Partition, error) {
	if err := c.checkTarget(target, TopicRF(t)); err != nil {
		return Partition{}, err
	}
	orig := cur.originalReplicas()
	replicas := append(slices.Clone(target), without(orig, target)...)
	next, err := c.reassigned(cur, replicas, without(target, orig), without(orig, target))
	if err == nil {
		completeIfCaughtUp(&next)
	}
	return next, err
}

// completeIfCaughtUp completes p's reassignment when every target replica
// is in the ISR: Replicas = target, the ISR keeps its target members, and a
// leader being removed hands over to the first target replica in the ISR.
// The caller bumps the epochs.
func completeIfCaughtUp(p *Partition) {
	if !p.Reassigning() {
		return
	}
	target := p.TargetReplicas()
	for _, r := range target {
		if !slices.Contains(p.ISR, r) {
			return
		}
	}
	p.Replicas = target
	p.ISR = slices.DeleteFunc(p.ISR, func(id int32) bool { return !slices.Contains(target, id) })
	p.Reassignment = nil
	if p.Leader != -1 && !slices.Contains(target, p.Leader) {
		p.Leader = target[slices.IndexFunc(target, func(id int32) bool { return slices.Contains(p.ISR, id) })]
	}
}

func (c *change) cancelReassignment(cur Partition) (Partition, error) {
	if !cur.Reassigning() {
		return Partition{}, ErrNoReassignment
	}
	return c.reassigned(cur, cur.originalReplicas(), nil, nil)
}

// checkTarget: rf distinct, known brokers.
func (c *change) checkTarget(target []int32, rf int) error {
	if len(target) == 0 || len(target) != rf {
		return fmt.Errorf("%w: %d target replicas, replication factor %d", ErrInvalidAssignment, len(target), rf)
	}
	for i, id := range target {
		if _, ok := c.img.Brokers[id]; !ok {
			return fmt.Errorf("%w: %d", ErrUnknownBroker, id)
		}
		if slices.Contains(target[:i], id) {
			return fmt.Errorf("%w: broker %d listed twice", ErrInvalidAssignment, id)
		}
	}
	return nil
}

// reassigned is cur with a new replica set: the ISR keeps its members that
// stay, and a leader that does not stay hands over to the first replica in
// the new ISR, alive ones first. Refused when no in-sync replica would stay.
func (c *change) reassigned(cur Partition, replicas, adding, removing []int32) (Partition, error) {
	next := cur.clone()
	next.Replicas = replicas
	next.Reassignment = newReassignment(nilIfEmpty(adding), nilIfEmpty(removing))
	next.ISR = slices.DeleteFunc(slices.Clone(cur.ISR), func(id int32) bool { return !slices.Contains(replicas, id) })
	if len(next.ISR) == 0 {
		return Partition{}, fmt.Errorf("%w: no in-sync replica (isr %v) among %v", ErrInvalidAssignment, cur.ISR, replicas)
	}
	if cur.Leader != -1 && !slices.Contains(replicas, cur.Leader) {
		next.Leader = c.firstInSync(replicas, next.ISR)
	}
	return next, nil
}

// firstInSync is the first of replicas in isr, preferring alive brokers.
func (c *change) firstInSync(replicas, isr []int32) int32 {
	first := int32(-1)
	for _, r := range replicas {
		if !slices.Contains(isr, r) {
			continue
		}
		if b, ok := c.img.Brokers[r]; ok && b.State == BrokerAlive {
			return r
		}
		if first == -1 {
			first = r
		}
	}
	return first
}

func samePlacement(a, b Partition) bool {
	return a.Leader == b.Leader && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.AddingReplicas(), b.AddingReplicas()) && slices.Equal(a.RemovingReplicas(), b.RemovingReplicas())
}

// without returns the members of ids not in drop, in order.
func without(ids, drop []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(drop, id) {
			out = append(out, id)
		}
	}
	return out
}

func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}
