package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Leader elections the active controller runs beyond what fencing does:
// preferred leader election moves leadership back to a partition's first
// replica once that replica is alive and in sync (Kafka's
// auto.leader.rebalance.enable), and unclean election brings an offline
// partition back with an out-of-sync replica when its topic allows it
// (unclean.leader.election.enable=true; it may lose acknowledged records).

// runLeaderElections is run on every controller; it acts while this node is
// the active controller. Stopped through ctx.
func (s *Server) runLeaderElections(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.meta.Status().Role != "leader" {
			continue
		}
		img, _ := s.meta.Image()
		for name := range img.Topics {
			if _, err := s.electLeaders(ctx, name); err != nil && ctx.Err() == nil {
				s.logger.Warn("leader election", "topic", name, "err", err)
			}
		}
	}
}

// electLeaders proposes the preferred and unclean elections a topic needs
// and returns how many partitions changed.
func (s *Server) electLeaders(ctx context.Context, topic string) (int64, error) {
	img, _ := s.meta.Image()
	t, ok := img.Topics[topic]
	if !ok {
		return 0, fmt.Errorf("%w: %s", errUnknownTopic, topic)
	}
	changes := leaderChanges(img, t)
	if len(changes) == 0 {
		return 0, nil
	}
	actx, cancel := context.WithTimeout(ctx, metadataApplyTimeout)
	defer cancel()
	res, err := s.meta.Apply(actx, raftfsm.Command{Version: 1, ChangePartitions: &raftfsm.ChangePartitions{Topic: topic, Changes: changes}})
	if err != nil {
		return 0, fmt.Errorf("elect leaders of %s: %w", topic, err)
	}
	if err := s.catchUpWithLeader(actx); err != nil {
		return 0, err
	}
	n, _ := res.(int64)
	if n > 0 {
		s.logger.Info("leaders elected", "topic", topic, "partitions", n)
	}
	return n, nil
}

// leaderChanges lists the partitions of t whose leader should change.
func leaderChanges(img *raftfsm.Image, t *raftfsm.Topic) []raftfsm.ChangePartition {
	alive := func(id int32) bool {
		b, ok := img.Brokers[id]
		return ok && b.State == raftfsm.BrokerAlive
	}
	unclean := effectiveConfig(t.Configs, "unclean.leader.election.enable") == "true"
	var out []raftfsm.ChangePartition
	for i, p := range t.Partitions {
		ch := raftfsm.ChangePartition{Topic: t.Name, Partition: int32(i),
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}
		switch {
		case len(p.Replicas) == 0:
			continue
		case p.Leader != p.Replicas[0] && alive(p.Replicas[0]) && slices.Contains(p.ISR, p.Replicas[0]):
			ch.Leader = p.Replicas[0]
		case p.Leader < 0 && unclean && !slices.ContainsFunc(p.ISR, alive):
			r := slices.IndexFunc(p.Replicas, alive)
			if r < 0 {
				continue
			}
			ch.Leader, ch.ISR = p.Replicas[r], []int32{p.Replicas[r]}
		default:
			continue
		}
		out = append(out, ch)
	}
	return out
}
