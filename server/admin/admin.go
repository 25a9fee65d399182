// Package admin is the metadata changes both front doors make the same
// way: topics created, deleted, reconfigured and grown (checked against the
// limits first; whether the topic exists, the controller's state machine
// decides, never this node's image, which may lag), partition reassignments, leader
// elections (the active controller's own, preferred and unclean, and those
// an admin asks for over HTTP or Kafka ElectLeaders), producer id blocks,
// and THE list of internal topics the doors refuse to let clients write.
// Every change goes to the controller as a raftfsm.Command and returns once
// this node has caught up with it (read your writes) and, for an admin
// change, every alive broker confirmed it (Config.PropagationTimeout).
//
// It reaches the node only through Metadata (quorum.Node implements it)
// and the two callbacks of Config, so it imports no door and never the
// root package server.
//
// Goroutines: none of its own; RunElections is run by the server on a
// controller and returns when its context ends.
//
// Lock order: producerIDs.mu is a leaf, never held while proposing.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

// Metadata is the metadata node as admin uses it; quorum.Node implements it.
type Metadata interface {
	Image() (*raftfsm.Image, <-chan struct{})
	Status() raftfsm.Status
	Apply(ctx context.Context, cmd raftfsm.Command) (any, error)
	CatchUp(ctx context.Context) error
	WaitBrokersApplied(ctx context.Context, index uint64) []int32
}

// Config is what an Admin is made from.
type Config struct {
	Meta   Metadata
	Limits raftfsm.Limits // the node's topic limits (the controller checks them again)
	// PropagationTimeout bounds the wait for every alive broker to
	// confirm an admin change (0: no wait).
	PropagationTimeout time.Duration
	Logger             *slog.Logger
	// Reconcile makes this node's partitions follow img after a change it
	// made (nil or a no-op on a node without partitions).
	Reconcile func(img *raftfsm.Image) error
	// TopicDeleted is told of a topic deleted through this node (its
	// metrics go); may be nil.
	TopicDeleted func(name string)
}

// Admin makes the metadata changes of both doors. Safe for concurrent use.
type Admin struct {
	cfg Config
	ids producerIDs
}

// New returns an Admin over cfg.
func New(cfg Config) *Admin {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Admin{cfg: cfg}
}

var (
	// Topic names and counts follow one set of rules, the FSM's: it applies
	// them again to every command in the log.
	ErrInvalidTopicName  = raftfsm.ErrInvalidTopicName
	ErrInvalidPartitions = errors.New("invalid partition count")
	ErrInvalidReplicas   = raftfsm.ErrInvalidReplicationFactor
)

// Broker-wide topic defaults (Kafka's num.partitions and default.replication.factor).
const (
	DefaultPartitions        = 1
	DefaultReplicationFactor = 1
	// ApplyTimeout bounds a proposal made without a deadline.
	ApplyTimeout = 10 * time.Second
)

// TopicSpec is a topic to create; -1 means the broker default.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	Assignments       [][]int32 // nil: the controller places the replicas
}

// Apply proposes a metadata command with a bounded wait.
func (a *Admin) Apply(ctx context.Context, cmd raftfsm.Command) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ApplyTimeout)
		defer cancel()
	}
	cmd.Version = 1
	res, err := a.cfg.Meta.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, a.changed(ctx, cmd.AllocateProducerIDs == nil) // ids are this broker's alone
}

// changed is what follows a metadata change this node proposed and
// that was committed: this node catches up with the active controller,
// every alive broker confirms it when propagate (an admin change other
// brokers must show once the call returns), and this broker's partitions
// follow the image so the caller can use what it just changed.
func (a *Admin) changed(ctx context.Context, propagate bool) error {
	if err := a.catchUpWithLeader(ctx); err != nil {
		return err
	}
	if propagate {
		a.propagate(ctx)
	}
	if a.cfg.Reconcile != nil {
		img, _ := a.cfg.Meta.Image()
		if err := a.cfg.Reconcile(img); err != nil {
			return err
		}
	}
	return nil
}

// checkTopicSpec validates a creation request against the limits and fills
// in defaults. The active controller checks the limits again (with the
// cluster-wide ones) before proposing.
func checkTopicSpec(spec TopicSpec, limits raftfsm.Limits) (TopicSpec, error) {
	if err := raftfsm.ValidateTopicName(spec.Name); err != nil {
		return spec, err
	}
	if spec.Partitions == -1 || spec.Partitions == 0 {
		spec.Partitions = DefaultPartitions
	}
	if spec.ReplicationFactor == -1 || spec.ReplicationFactor == 0 {
		spec.ReplicationFactor = DefaultReplicationFactor
	}
	if err := limits.CheckTopic(spec.Partitions, spec.ReplicationFactor); err != nil {
		return spec, err
	}
	if err := topicconfig.ValidateAll(spec.Configs); err != nil {
		return spec, err
	}
	return spec, nil
}

// CreateTopic creates a topic (or, validateOnly, checks that it could).
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool) (*raftfsm.Topic, error) {
	spec, err := checkTopicSpec(spec, a.cfg.Limits)
	if err != nil {
		return nil, err
	}
	img, _ := a.cfg.Meta.Image()
	// Only a dry run answers "exists" from this node's image: it may lag
	// (a paused or restarted node), and a topic deleted meanwhile would be
	// refused with a 409 that no order of the writes explains (the
	// metadata linearizability check found it). A real creation lets the
	// controller's state machine decide, in the log's order.
	if _, ok := img.Topics.Lookup(spec.Name); ok && validateOnly {
		return nil, fmt.Errorf("%w: %s", raftfsm.ErrTopicExists, spec.Name)
	}
	if err := checkAssignedBrokers(img, spec.Assignments); err != nil {
		return nil, err
	}
	if validateOnly {
		// The controller checks placement for real; this node's image may lag.
		if alive := AliveBrokers(img); int(spec.ReplicationFactor) > alive {
			return nil, fmt.Errorf("%w: replication factor %d, %d brokers alive", raftfsm.ErrNotEnoughBrokers, spec.ReplicationFactor, alive)
		}
		return nil, nil
	}
	res, err := a.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{
		Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor, Configs: spec.Configs,
		Assignments: spec.Assignments,
	}})
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", spec.Name, err)
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

// AliveBrokers counts the alive brokers of img.
func AliveBrokers(img *raftfsm.Image) int {
	n := 0
	for _, b := range img.Brokers {
		if b.State == raftfsm.BrokerAlive {
			n++
		}
	}
	return n
}

// DeleteTopic deletes a topic and forgets its metrics.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	if _, err := a.Apply(ctx, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: name}}); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	if a.cfg.TopicDeleted != nil {
		a.cfg.TopicDeleted(name)
	}
	return nil
}

// AlterTopicConfigs sets (non-nil) or removes (nil) configs and applies
// listOps (Kafka's APPEND and SUBTRACT), all or nothing. Whether the topic
// exists is the controller's state machine's answer, in the log's order:
// this node's image may lag (a restarted, paused or cut-off node), and an
// "unknown topic" from it could contradict a creation already acknowledged
// (the metadata linearizability check found it, issue 20). Only a dry run
// answers from the image.
func (a *Admin) AlterTopicConfigs(ctx context.Context, name string, changes map[string]*string, listOps []raftfsm.ConfigListOp, validateOnly bool) (*raftfsm.Topic, error) {
	cmd := &raftfsm.AlterConfigs{Topic: name, Set: map[string]string{}, ListOps: listOps}
	for k, v := range changes {
		if v == nil {
			if _, ok := topicconfig.Lookup(k); !ok {
				return nil, fmt.Errorf("%w: unknown config %q", topicconfig.ErrInvalid, k)
			}
			cmd.Delete = append(cmd.Delete, k)
			continue
		}
		if err := topicconfig.Validate(k, *v); err != nil {
			return nil, err
		}
		cmd.Set[k] = *v
	}
	if validateOnly {
		_, t, ok := a.LookupTopic(ctx, name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", broker.ErrUnknownTopic, name)
		}
		return t, nil
	}
	res, err := a.Apply(ctx, raftfsm.Command{AlterConfigs: cmd})
	if err != nil {
		return nil, fmt.Errorf("alter configs of %s: %w", name, err)
	}
	return res.(*raftfsm.Topic), nil
}

// CreatePartitions raises a topic's partition count; the controller
// places the new replicas.
func (a *Admin) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	return a.CreateAssignedPartitions(ctx, name, count, nil, validateOnly)
}

// CreateAssignedPartitions raises a topic's partition count; assignments,
// when set, are the new partitions' replicas (the FSM checks their count
// and replication factor again). As with configs, the topic's existence
// and partition count are checked by the active controller (against its
// image once current, raftfsm's prepare) and its state machine; only a dry
// run answers from this node's image.
func (a *Admin) CreateAssignedPartitions(ctx context.Context, name string, count int32, assignments [][]int32, validateOnly bool) error {
	if validateOnly {
		img, t, ok := a.LookupTopic(ctx, name)
		if !ok {
			return fmt.Errorf("%w: %s", broker.ErrUnknownTopic, name)
		}
		if int(count) <= len(t.Partitions) {
			return fmt.Errorf("%w: %s has %d partitions, asked for %d", ErrInvalidPartitions, name, len(t.Partitions), count)
		}
		if err := a.cfg.Limits.CheckTopic(count, ReplicationFactor(t)); err != nil {
			return err
		}
		return checkAssignedBrokers(img, assignments)
	}
	img, _ := a.cfg.Meta.Image()
	if err := checkAssignedBrokers(img, assignments); err != nil {
		return err
	}
	_, err := a.Apply(ctx, raftfsm.Command{CreatePartitions: &raftfsm.CreatePartitions{Topic: name, Count: count,
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
func (a *Admin) propagate(ctx context.Context) {
	if a.cfg.PropagationTimeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PropagationTimeout)
	defer cancel()
	img, _ := a.cfg.Meta.Image()
	if behind := a.cfg.Meta.WaitBrokersApplied(ctx, img.Index); len(behind) > 0 {
		a.cfg.Logger.Warn("metadata change not confirmed by every alive broker in time",
			"index", img.Index, "brokers", behind, "timeout", a.cfg.PropagationTimeout)
	}
}

// catchUpWithLeader waits until this node has applied everything the active
// controller had committed, so a change made through this node (forwarded
// to the leader) is visible here when the call returns: read your writes.
func (a *Admin) catchUpWithLeader(ctx context.Context) error {
	err := a.cfg.Meta.CatchUp(ctx)
	switch {
	case errors.Is(err, raftfsm.ErrNotLeader):
		return nil // no leader to ask now; the change was committed anyway
	case err != nil:
		return fmt.Errorf("catch up with the active controller: %w", err)
	}
	return nil
}

// StartReassignment proposes a partition's new replica set.
func (a *Admin) StartReassignment(ctx context.Context, topic string, idx int32, target []int32) error {
	return a.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx,
		Action: raftfsm.ReassignStart, Target: slices.Clone(target)})
}

// CancelReassignment reverts a running reassignment.
func (a *Admin) CancelReassignment(ctx context.Context, topic string, idx int32) error {
	return a.reassign(ctx, &raftfsm.ReassignPartition{Topic: topic, Partition: idx, Action: raftfsm.ReassignCancel})
}

func (a *Admin) reassign(ctx context.Context, cmd *raftfsm.ReassignPartition) error {
	if _, err := a.Apply(ctx, raftfsm.Command{ReassignPartition: cmd}); err != nil {
		return fmt.Errorf("%s reassignment of %s-%d: %w", cmd.Action, cmd.Topic, cmd.Partition, err)
	}
	return nil
}

// LookupTopic finds a topic in this node's metadata image, catching up with
// the active controller first when it is not there.
func (a *Admin) LookupTopic(ctx context.Context, name string) (*raftfsm.Image, *raftfsm.Topic, bool) {
	img, _ := a.cfg.Meta.Image()
	if t, ok := img.Topics.Lookup(name); ok {
		return img, t, true
	}
	if !broker.CatchUpOnMiss(ctx, a.cfg.Meta) {
		return img, nil, false
	}
	img, _ = a.cfg.Meta.Image()
	t, ok := img.Topics.Lookup(name)
	return img, t, ok
}

// CatchUp waits until this node applied what the active controller had
// committed; no active controller to ask is not an error.
func (a *Admin) CatchUp(ctx context.Context) error { return a.catchUpWithLeader(ctx) }

// ReplicationFactor is a topic's replication factor.
func ReplicationFactor(t *raftfsm.Topic) int16 {
	if len(t.Partitions) == 0 {
		return 0
	}
	return int16(len(t.Partitions[0].TargetReplicas())) // not counting replicas a reassignment removes
}
