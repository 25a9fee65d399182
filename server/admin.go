package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker"
)

var (
	// Topic names and counts follow one set of rules, the FSM's: it applies
	// them again to every command in the log.
	errInvalidTopicName  = raftfsm.ErrInvalidTopicName
	errInvalidPartitions = errors.New("invalid partition count")
	errInvalidReplicas   = raftfsm.ErrInvalidReplicationFactor
)

// Broker-wide topic defaults (Kafka's num.partitions and default.replication.factor).
const (
	defaultPartitions        = 1
	defaultReplicationFactor = 1
	metadataApplyTimeout     = 10 * time.Second
)

// validateTopicName applies Kafka's rules (raftfsm.ValidateTopicName).
func validateTopicName(name string) error { return raftfsm.ValidateTopicName(name) }

// topicSpec is a topic to create; -1 means the broker default.
type topicSpec struct {
	name              string
	partitions        int32
	replicationFactor int16
	configs           map[string]string
	assignments       [][]int32 // nil: the controller places the replicas
}

// applyMeta proposes a metadata command with a bounded wait.
func (s *Server) applyMeta(ctx context.Context, cmd raftfsm.Command) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, metadataApplyTimeout)
		defer cancel()
	}
	cmd.Version = 1
	res, err := s.meta.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, s.metaChanged(ctx, cmd.AllocateProducerIDs == nil) // ids are this broker's alone
}

// metaChanged is what follows a metadata change this node proposed and
// that was committed: this node catches up with the active controller,
// every alive broker confirms it when propagate (an admin change other
// brokers must show once the call returns), and this broker's partitions
// follow the image so the caller can use what it just changed.
func (s *Server) metaChanged(ctx context.Context, propagate bool) error {
	if err := s.catchUpWithLeader(ctx); err != nil {
		return err
	}
	if propagate {
		s.propagate(ctx)
	}
	if s.broker != nil {
		img, _ := s.meta.Image()
		if err := s.broker.Reconcile(img); err != nil {
			return err
		}
	}
	return nil
}

// checkTopicSpec validates a creation request against the limits and fills
// in defaults. The active controller checks the limits again (with the
// cluster-wide ones) before proposing.
func checkTopicSpec(spec topicSpec, limits raftfsm.Limits) (topicSpec, error) {
	if err := validateTopicName(spec.name); err != nil {
		return spec, err
	}
	if spec.partitions == -1 || spec.partitions == 0 {
		spec.partitions = defaultPartitions
	}
	if spec.replicationFactor == -1 || spec.replicationFactor == 0 {
		spec.replicationFactor = defaultReplicationFactor
	}
	if err := limits.CheckTopic(spec.partitions, spec.replicationFactor); err != nil {
		return spec, err
	}
	if err := broker.ValidateTopicConfigs(spec.configs); err != nil {
		return spec, err
	}
	return spec, nil
}

func (s *Server) createTopic(ctx context.Context, spec topicSpec, validateOnly bool) (*raftfsm.Topic, error) {
	spec, err := checkTopicSpec(spec, s.cfg.TopicLimits)
	if err != nil {
		return nil, err
	}
	img, _ := s.meta.Image()
	// Only a dry run answers "exists" from this node's image: it may lag
	// (a paused or restarted node), and a topic deleted meanwhile would be
	// refused with a 409 that no order of the writes explains (the
	// metadata linearizability check found it). A real creation lets the
	// controller's state machine decide, in the log's order.
	if _, ok := img.Topics.Lookup(spec.name); ok && validateOnly {
		return nil, fmt.Errorf("%w: %s", raftfsm.ErrTopicExists, spec.name)
	}
	if err := checkAssignedBrokers(img, spec.assignments); err != nil {
		return nil, err
	}
	if validateOnly {
		// The controller checks placement for real; this node's image may lag.
		if alive := aliveBrokers(img); int(spec.replicationFactor) > alive {
			return nil, fmt.Errorf("%w: replication factor %d, %d brokers alive", raftfsm.ErrNotEnoughBrokers, spec.replicationFactor, alive)
		}
		return nil, nil
	}
	res, err := s.applyMeta(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{
		Name: spec.name, Partitions: spec.partitions, ReplicationFactor: spec.replicationFactor, Configs: spec.configs,
		Assignments: spec.assignments,
	}})
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", spec.name, err)
	}
	return res.(*raftfsm.Topic), nil
}

// checkAssignedBrokers: a replica assignment names only alive brokers
// (the FSM checks only that they are registered).
func checkAssignedBrokers(img *raftfsm.Image, assignments [][]int32) error {
	for p, replicas := range assignments {
		for _, id := range replicas {
			if b, ok := img.Brokers[id]; !ok || b.State != raftfsm.BrokerAlive {
				return fmt.Errorf("%w: broker %d (partition %d) is not an alive broker", raftfsm.ErrInvalidAssignment, id, p)
			}
		}
	}
	return nil
}

func aliveBrokers(img *raftfsm.Image) int {
	n := 0
	for _, b := range img.Brokers {
		if b.State == raftfsm.BrokerAlive {
			n++
		}
	}
	return n
}

func (s *Server) deleteTopic(ctx context.Context, name string) error {
	if _, err := s.applyMeta(ctx, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: name}}); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	s.metrics.forget(name)
	return nil
}

// alterTopicConfigs sets (non-nil) or removes (nil) configs, all or nothing.
func (s *Server) alterTopicConfigs(ctx context.Context, name string, changes map[string]*string, validateOnly bool) (*raftfsm.Topic, error) {
	cmd := &raftfsm.AlterConfigs{Topic: name, Set: map[string]string{}}
	for k, v := range changes {
		if v == nil {
			if _, ok := broker.LookupTopicConfig(k); !ok {
				return nil, fmt.Errorf("%w: unknown config %q", broker.ErrInvalidConfig, k)
			}
			cmd.Delete = append(cmd.Delete, k)
			continue
		}
		if err := broker.ValidateTopicConfig(k, *v); err != nil {
			return nil, err
		}
		cmd.Set[k] = *v
	}
	_, t, ok := s.lookupTopic(ctx, name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", broker.ErrUnknownTopic, name)
	}
	if validateOnly {
		return t, nil
	}
	res, err := s.applyMeta(ctx, raftfsm.Command{AlterConfigs: cmd})
	if err != nil {
		return nil, fmt.Errorf("alter configs of %s: %w", name, err)
	}
	return res.(*raftfsm.Topic), nil
}

func (s *Server) createPartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	return s.createAssignedPartitions(ctx, name, count, nil, validateOnly)
}

// createAssignedPartitions raises a topic's partition count; assignments,
// when set, are the new partitions' replicas (the FSM checks their count
// and replication factor again).
func (s *Server) createAssignedPartitions(ctx context.Context, name string, count int32, assignments [][]int32, validateOnly bool) error {
	img, t, ok := s.lookupTopic(ctx, name)
	if !ok {
		return fmt.Errorf("%w: %s", broker.ErrUnknownTopic, name)
	}
	if int(count) <= len(t.Partitions) {
		return fmt.Errorf("%w: %s has %d partitions, asked for %d", errInvalidPartitions, name, len(t.Partitions), count)
	}
	if err := s.cfg.TopicLimits.CheckTopic(count, replicationFactor(t)); err != nil {
		return err
	}
	if err := checkAssignedBrokers(img, assignments); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	_, err := s.applyMeta(ctx, raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: name, Count: count,
		Assignments: assignments}})
	if err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	return nil
}

// propagate waits (at most Config.MetadataPropagationTimeout) until every
// alive broker has applied what this node has, which includes the change
// just made: once an admin call returns, Metadata from any broker shows it
// (issue 18). A broker that does not confirm in time (paused, partitioned;
// the controller fences it once its session lapses) only delays the answer:
// the change is committed either way, so the call still succeeds.
func (s *Server) propagate(ctx context.Context) {
	if s.cfg.MetadataPropagationTimeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MetadataPropagationTimeout)
	defer cancel()
	img, _ := s.meta.Image()
	if behind := s.meta.WaitBrokersApplied(ctx, img.Index); len(behind) > 0 {
		s.logger.Warn("metadata change not confirmed by every alive broker in time",
			"index", img.Index, "brokers", behind, "timeout", s.cfg.MetadataPropagationTimeout)
	}
}

// catchUpWithLeader waits until this node has applied everything the active
// controller had committed, so a change made through this node (forwarded
// to the leader) is visible here when the call returns: read your writes.
func (s *Server) catchUpWithLeader(ctx context.Context) error {
	err := s.meta.CatchUp(ctx)
	switch {
	case errors.Is(err, raftfsm.ErrNotLeader):
		return nil // no leader to ask now; the change was committed anyway
	case err != nil:
		return fmt.Errorf("catch up with the active controller: %w", err)
	}
	return nil
}
