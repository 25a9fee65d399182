package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Online partition reassignment (raftfsm.ReassignPartition). Starting one
// adds the target replicas to the partition's replica set: brokers that are
// new to it open the log and replicate from the leader through the usual
// fetcher, and the leader puts them in the ISR (wantedISR) once they are
// caught up. That ISR change completes the reassignment in the metadata;
// brokers no longer in the replica set then stop fetching, close and delete
// their copy (dropReplicaLocked, called by hostTopicLocked).

// startReassignment proposes a partition's new replica set.
func (s *Server) startReassignment(ctx context.Context, topic string, idx int32, target []int32) error {
	return s.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx,
		Action: raftfsm.ReassignStart, Target: slices.Clone(target)})
}

// cancelReassignment reverts a running reassignment.
func (s *Server) cancelReassignment(ctx context.Context, topic string, idx int32) error {
	return s.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx, Action: raftfsm.ReassignCancel})
}

func (s *Server) reassign(ctx context.Context, cmd *raftfsm.ReassignPartition) error {
	if _, err := s.applyMeta(ctx, raftfsm.Command{ReassignPartition: cmd}); err != nil {
		return fmt.Errorf("%s reassignment of %s-%d: %w", cmd.Action, cmd.Topic, cmd.Partition, err)
	}
	return nil
}

// syncFollowersLocked makes a leader's follower table match the replica set
// without a leadership change: a new replica starts unknown with a fresh
// lag budget, a dropped one is forgotten. Called with p.repl.mu held.
func (p *partition) syncFollowersLocked(replicas []int32) {
	now := time.Now()
	for _, r := range replicas {
		if _, ok := p.repl.followers[r]; !ok && r != p.repl.self {
			p.repl.followers[r] = &followerState{leo: -1, caughtUpAt: now}
		}
	}
	for r := range p.repl.followers {
		if !slices.Contains(replicas, r) {
			delete(p.repl.followers, r)
		}
	}
}

// dropReplicaLocked stops hosting partition idx of ht if it is hosted here:
// no more fetching, waiters woken, the log closed and deleted. Called with
// b.mu held.
func (b *broker) dropReplicaLocked(ht *hostedTopic, idx int32) {
	p, ok := ht.parts[idx]
	if !ok {
		return
	}
	delete(ht.parts, idx)
	b.fetches.forget(p)
	p.wake()
	if err := p.log.Delete(); err != nil {
		b.logger.Warn("delete reassigned replica", "topic", p.topic, "partition", idx, "err", err)
		return
	}
	b.logger.Info("replica reassigned away, deleted", "topic", p.topic, "partition", idx)
}
