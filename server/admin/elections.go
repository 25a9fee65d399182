package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

// Leader elections the active controller runs beyond what fencing does:
// preferred leader election moves leadership back to a partition's first
// replica once that replica is alive and in sync (Kafka's
// auto.leader.rebalance.enable), and unclean election brings an offline
// partition back with an out-of-sync replica when its topic allows it
// (unclean.leader.election.enable=true; it may lose acknowledged records).

// RunElections is run on every controller; it acts while this node is
// the active controller. Stopped through ctx.
func (a *Admin) RunElections(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if a.cfg.Meta.Status().Role != "leader" {
			continue
		}
		img, _ := a.cfg.Meta.Image()
		for name := range img.Topics.All() {
			if _, _, err := a.ElectPartitions(ctx, name, nil, ElectAuto, false); err != nil && ctx.Err() == nil {
				a.cfg.Logger.Warn("leader election", "topic", name, "err", err)
			}
		}
	}
}

// Per-partition outcomes of an election asked for by an admin
// (ElectLeaders; each door's error table maps them).
var (
	ErrElectionNotNeeded           = errors.New("the partition's leader is already the one the election would choose")
	ErrPreferredLeaderNotAvailable = errors.New("the preferred replica is not alive and in sync")
	ErrEligibleLeadersNotAvailable = errors.New("no replica may lead the partition")
)

// ElectionMode is the kind of election ElectPartitions runs.
type ElectionMode int

const (
	// ElectAuto is what the controller runs on its own and HTTP POST
	// /v1/topics/{topic}/elect-leaders asks for: preferred where possible,
	// unclean where the topic allows it; partitions needing neither are
	// left alone without an error.
	ElectAuto ElectionMode = iota
	ElectPreferred
	ElectUnclean
)

// ElectLeaders proposes the preferred and unclean elections a topic needs,
// as HTTP elect-leaders asks, and returns how many partitions changed.
func (a *Admin) ElectLeaders(ctx context.Context, topic string) (int64, error) {
	_, n, err := a.ElectPartitions(ctx, topic, nil, ElectAuto, true)
	return n, err
}

// ElectPartitions runs the elections of mode on the given partitions of a
// topic (all when nil): the one code path of the controller's own
// elections, HTTP elect-leaders and Kafka ElectLeaders. It returns each
// named partition's outcome (nil: elected, or nothing to do in ElectAuto)
// and how many leaders changed. An admin's election (asked) returns once
// this broker follows the new leaders and every alive broker names them
// (issue 18: Metadata from any broker shows what the call did); the
// controller's own elections don't wait on other brokers.
func (a *Admin) ElectPartitions(ctx context.Context, topic string, partitions []int32, mode ElectionMode, asked bool) (map[int32]error, int64, error) {
	actx, cancel := context.WithTimeout(ctx, ApplyTimeout)
	defer cancel()
	img, t, err := a.electionTopic(actx, topic, asked)
	if err != nil {
		return nil, 0, err
	}
	changes, results := elections(img, t, partitions, mode)
	if len(changes) == 0 {
		return results, 0, nil
	}
	res, err := a.cfg.Meta.Apply(actx, raftfsm.Command{Version: 1, ChangePartitions: &raftfsm.ChangePartitions{Topic: topic, Changes: changes}})
	if err != nil {
		return nil, 0, fmt.Errorf("elect leaders of %s: %w", topic, err)
	}
	if asked {
		err = a.changed(actx, true)
	} else {
		err = a.catchUpWithLeader(actx)
	}
	if err != nil {
		return nil, 0, err
	}
	n, _ := res.(int64)
	if n > 0 {
		a.cfg.Logger.Info("leaders elected", "topic", topic, "partitions", n)
	}
	return results, n, nil
}

// electionTopic finds the topic an election is about. An admin's election
// on a topic this node does not know does not answer "unknown topic" from
// its image, which may lag (issue 20: such an answer could contradict a
// creation already acknowledged): an empty ChangePartitions lets the
// controller's state machine tell, in the log's order, and once it says
// the topic exists this node catches up to decide the election. If it
// cannot catch up (no controller to ask), the outcome is not known:
// ErrNotLeader.
func (a *Admin) electionTopic(ctx context.Context, topic string, asked bool) (*raftfsm.Image, *raftfsm.Topic, error) {
	if asked {
		// Decide from the controller's current state where this node can
		// reach it: elections decided on a lagging image name stale epochs,
		// which the state machine skips.
		if err := a.catchUpWithLeader(ctx); err != nil {
			return nil, nil, err
		}
	}
	img, t, ok := a.LookupTopic(ctx, topic)
	if ok || !asked {
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s", broker.ErrUnknownTopic, topic)
		}
		return img, t, nil
	}
	if _, err := a.cfg.Meta.Apply(ctx, raftfsm.Command{Version: 1, ChangePartitions: &raftfsm.ChangePartitions{Topic: topic}}); err != nil {
		return nil, nil, fmt.Errorf("elect leaders of %s: %w", topic, err)
	}
	if err := a.cfg.Meta.CatchUp(ctx); err != nil && !errors.Is(err, raftfsm.ErrNotLeader) {
		return nil, nil, fmt.Errorf("elect leaders of %s: catch up with the active controller: %w", topic, err)
	}
	if img, t, ok = a.LookupTopic(ctx, topic); !ok {
		return nil, nil, fmt.Errorf("elect leaders of %s: %w (the controller knows the topic, this node could not catch up)", topic, raftfsm.ErrNotLeader)
	}
	return img, t, nil
}

// leaderChanges lists the partitions of t whose leader should change.
func leaderChanges(img *raftfsm.Image, t *raftfsm.Topic) []raftfsm.ChangePartition {
	changes, _ := elections(img, t, nil, ElectAuto)
	return changes
}

// elections decides the elections of mode on t's partitions (all when
// only is nil): the changes to propose and every named partition's
// outcome.
func elections(img *raftfsm.Image, t *raftfsm.Topic, only []int32, mode ElectionMode) ([]raftfsm.ChangePartition, map[int32]error) {
	if only == nil {
		only = make([]int32, len(t.Partitions))
		for i := range only {
			only[i] = int32(i)
		}
	}
	var out []raftfsm.ChangePartition
	results := make(map[int32]error, len(only))
	for _, i := range only {
		if i < 0 || int(i) >= len(t.Partitions) {
			results[i] = fmt.Errorf("%w: %s-%d", broker.ErrUnknownPartition, t.Name, i)
			continue
		}
		ch, err := election(img, t, i, mode)
		results[i] = err
		if err == nil && ch.Leader >= 0 {
			out = append(out, ch)
		}
	}
	return out, results
}

// election decides one partition's election; a change with Leader -1
// means nothing to do (ElectAuto only).
func election(img *raftfsm.Image, t *raftfsm.Topic, i int32, mode ElectionMode) (raftfsm.ChangePartition, error) {
	alive := func(id int32) bool {
		b, ok := img.Brokers[id]
		return ok && b.State == raftfsm.BrokerAlive
	}
	p := t.Partitions[i]
	ch := raftfsm.ChangePartition{Topic: t.Name, Partition: i, Leader: -1,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}
	unclean := topicconfig.Effective(t.Configs, "unclean.leader.election.enable") == "true"
	preferredOK := len(p.Replicas) > 0 && alive(p.Replicas[0]) && slices.Contains(p.ISR, p.Replicas[0])
	switch {
	case len(p.Replicas) == 0:
		return ch, outcome(mode, ErrEligibleLeadersNotAvailable)
	case mode != ElectUnclean && p.Leader == p.Replicas[0]:
		return ch, outcome(mode, ErrElectionNotNeeded)
	case mode != ElectUnclean && preferredOK:
		ch.Leader = p.Replicas[0]
		return ch, nil
	case mode == ElectPreferred:
		return ch, ErrPreferredLeaderNotAvailable
	case p.Leader >= 0:
		return ch, outcome(mode, ErrElectionNotNeeded)
	}
	// No leader: an alive in-sync replica first (clean), then, when the
	// topic allows it, any alive replica (unclean).
	if r := slices.IndexFunc(p.ISR, alive); r >= 0 && mode == ElectUnclean {
		ch.Leader = p.ISR[r]
		return ch, nil
	}
	if slices.ContainsFunc(p.ISR, alive) || !unclean {
		return ch, outcome(mode, fmt.Errorf("%w: unclean.leader.election.enable is false for %s", ErrEligibleLeadersNotAvailable, t.Name))
	}
	r := slices.IndexFunc(p.Replicas, alive)
	if r < 0 {
		return ch, outcome(mode, ErrEligibleLeadersNotAvailable)
	}
	ch.Leader, ch.ISR = p.Replicas[r], []int32{p.Replicas[r]}
	return ch, nil
}

// outcome is err for an election an admin asked for; ElectAuto reports
// no error for a partition it leaves alone.
func outcome(mode ElectionMode, err error) error {
	if mode == ElectAuto {
		return nil
	}
	return err
}
