package raftfsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The command handlers. Each validates against c.img, then records its
// changes in c and returns the command's result; an error leaves nothing
// changed. Values in c.img are shared with published images: replace them,
// never modify them.

func (c *change) topic(name string) (*Topic, error) {
	t, ok := c.img.Topics.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t, nil
}

func (c *change) createTopic(cmd *CreateTopic) (any, error) {
	if cmd.Name == "" {
		return nil, fmt.Errorf("%w: empty topic name", ErrInvalidCommand)
	}
	if _, ok := c.img.Topics.Lookup(cmd.Name); ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, cmd.Name)
	}
	if cmd.Partitions < 1 || cmd.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: %d partitions, replication factor %d", ErrInvalidPartitions, cmd.Partitions, cmd.ReplicationFactor)
	}
	if err := c.checkAssignments(cmd.Assignments, int(cmd.Partitions), int(cmd.ReplicationFactor)); err != nil {
		return nil, err
	}
	t := &Topic{ID: cmd.TopicID, Name: cmd.Name, Configs: copyConfigs(cmd.Configs)}
	if t.ID == ([16]byte{}) {
		t.ID = derivedTopicID(cmd.Name, c.index)
	}
	t.Partitions = newPartitions(cmd.Assignments)
	c.putTopic(t)
	return t, nil
}

// derivedTopicID is a deterministic UUIDv4-shaped id for a command proposed
// without one (Apply always sets one; this keeps the FSM deterministic).
func derivedTopicID(name string, index uint64) [16]byte {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint64(nil, index))
	h.Write([]byte(name))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func newPartitions(assignments [][]int32) []Partition {
	ps := make([]Partition, len(assignments))
	for i, r := range assignments {
		ps[i] = Partition{
			Leader:   r[0],
			Replicas: slices.Clone(r),
			ISR:      slices.Clone(r),
		}
	}
	return ps
}

// checkAssignments checks there are n assignments of rf distinct, known brokers.
func (c *change) checkAssignments(as [][]int32, n, rf int) error {
	if len(as) != n {
		return fmt.Errorf("%w: %d assignments for %d partitions", ErrInvalidAssignment, len(as), n)
	}
	for p, r := range as {
		if len(r) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", ErrInvalidAssignment, p, len(r), rf)
		}
		for i, id := range r {
			if _, ok := c.img.Brokers[id]; !ok {
				return fmt.Errorf("%w: %d (partition %d)", ErrUnknownBroker, id, p)
			}
			if slices.Contains(r[:i], id) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidAssignment, p, id)
			}
		}
	}
	return nil
}

func copyConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *change) deleteTopic(cmd *DeleteTopic) (any, error) {
	t, err := c.topic(cmd.Name)
	if err != nil {
		return nil, err
	}
	if c.img.load != nil {
		c.img.load.add(t, -1)
	}
	c.img.Topics = c.img.Topics.Without(cmd.Name)
	c.topics = append(c.topics, cmd.Name)
	c.writes = append(c.writes, write{key: topicKey(cmd.Name)})
	return t, nil
}

func (c *change) alterConfigs(cmd *AlterConfigs) (any, error) {
	t, err := c.topic(cmd.Topic)
	if err != nil {
		return nil, err
	}
	t = t.clone()
	for k, v := range cmd.Set {
		t.Configs[k] = v
	}
	for _, k := range cmd.Delete {
		delete(t.Configs, k)
	}
	for _, op := range cmd.ListOps {
		cur, ok := t.Configs[op.Name]
		if !ok {
			cur = op.Default
		}
		v := ApplyListOp(cur, op)
		if v == "" && op.Default != "" {
			return nil, fmt.Errorf("%w: %s would be empty", ErrInvalidConfig, op.Name)
		}
		if len(v) > maxConfigValueLen {
			return nil, fmt.Errorf("%w: %s would be %d bytes (at most %d)", ErrInvalidConfig, op.Name, len(v), maxConfigValueLen)
		}
		t.Configs[op.Name] = v
	}
	c.putTopic(t)
	return t, nil
}

// ApplyListOp is op applied to the list value cur: the values added (each
// once) or removed, joined by commas. The FSM applies it; a front door
// answering a dry run from its own image applies it the same way.
func ApplyListOp(cur string, op ConfigListOp) string {
	var values []string
	for _, p := range strings.Split(cur, ",") {
		if p = strings.TrimSpace(p); p != "" {
			values = append(values, p)
		}
	}
	for _, v := range op.Values {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if op.Subtract {
			values = slices.DeleteFunc(values, func(have string) bool { return have == v })
		} else if !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	return strings.Join(values, ",")
}

func (c *change) createPartitions(cmd *CreatePartitions) (any, error) {
	t, err := c.topic(cmd.Topic)
	if err != nil {
		return nil, err
	}
	have := int32(len(t.Partitions))
	if cmd.Count <= have {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d", ErrInvalidPartitions, cmd.Topic, have, cmd.Count)
	}
	if err := c.checkAssignments(cmd.Assignments, int(cmd.Count-have), TopicRF(t)); err != nil {
		return nil, err
	}
	t = t.clone()
	t.Partitions = append(t.Partitions, newPartitions(cmd.Assignments)...)
	c.putTopic(t)
	return t, nil
}

// TopicRF is a topic's replication factor: its first partition's (its
// target's while it is being reassigned).
func TopicRF(t *Topic) int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].TargetReplicas())
}

func (c *change) registerBroker(cmd *RegisterBroker) (any, error) {
	if cmd.ID < 0 {
		return nil, fmt.Errorf("%w: broker id %d", ErrInvalidCommand, cmd.ID)
	}
	b := &Broker{
		ID:            cmd.ID,
		IncarnationID: cmd.IncarnationID,
		Epoch:         int64(c.index),
		Rack:          cmd.Rack,
		HTTPAddr:      cmd.HTTPAddr,
		KafkaAddr:     cmd.KafkaAddr,
		KafkaTLSAddr:  cmd.KafkaTLSAddr,
		RaftAddr:      cmd.RaftAddr,
		State:         BrokerAlive,
		Heartbeats:    cmd.Heartbeats,
	}
	if cmd.Heartbeats {
		b.State = BrokerFenced
	}
	c.putBroker(b)
	return b, nil
}

func (c *change) setBrokerState(cmd *SetBrokerState) (any, error) {
	b, ok := c.img.Brokers[cmd.ID]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownBroker, cmd.ID)
	}
	if cmd.Epoch != b.Epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleEpoch, cmd.ID, cmd.Epoch, b.Epoch)
	}
	switch cmd.State {
	case BrokerAlive, BrokerFenced, BrokerShuttingDown:
	default:
		return nil, fmt.Errorf("%w: broker state %q", ErrInvalidCommand, cmd.State)
	}
	nb := *b
	nb.State = cmd.State
	c.putBroker(&nb)
	return &nb, nil
}

func (c *change) changePartition(cmd *ChangePartition) (any, error) {
	t, err := c.topic(cmd.Topic)
	if err != nil {
		return nil, err
	}
	if err := c.checkPartitionChange(t, cmd); err != nil {
		return nil, err
	}
	old := t
	t = t.withPartitions()
	p := setPartition(t, cmd)
	c.putTopicChanged(old, t, []int32{cmd.Partition})
	res := p.clone()
	return &res, nil
}

// changePartitions costs time in the changes (plus one copy of the
// topic's partition structs and its encoding): the controller moves
// thousands of leaders with it when a broker shuts down.
func (c *change) changePartitions(cmd *ChangePartitions) (any, error) {
	t, err := c.topic(cmd.Topic)
	if err != nil {
		return nil, err
	}
	old := t
	t = t.withPartitions()
	var changed []int32
	for i := range cmd.Changes {
		ch := cmd.Changes[i]
		ch.Topic = cmd.Topic
		if c.checkPartitionChange(t, &ch) != nil {
			continue
		}
		setPartition(t, &ch)
		changed = append(changed, ch.Partition)
	}
	applied := int64(len(changed))
	if applied > 0 {
		c.putTopicChanged(old, t, changed)
	}
	return applied, nil
}

// checkPartitionChange validates cmd against t's current partition and the
// brokers' states.
func (c *change) checkPartitionChange(t *Topic, cmd *ChangePartition) error {
	if cmd.Partition < 0 || int(cmd.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %q/%d", ErrUnknownPartition, cmd.Topic, cmd.Partition)
	}
	cur := t.Partitions[cmd.Partition]
	if cmd.LeaderEpoch != cur.LeaderEpoch || cmd.PartitionEpoch != cur.PartitionEpoch {
		return fmt.Errorf("%w: %q/%d at epochs %d/%d, current %d/%d", ErrStaleEpoch,
			cmd.Topic, cmd.Partition, cmd.LeaderEpoch, cmd.PartitionEpoch, cur.LeaderEpoch, cur.PartitionEpoch)
	}
	if err := checkLeaderISR(cur.Replicas, cmd.Leader, cmd.ISR); err != nil {
		return fmt.Errorf("%w (%q/%d)", err, cmd.Topic, cmd.Partition)
	}
	// KIP-841: the ISR grows only by alive brokers. A fenced broker may
	// still be fetching from a leader that cannot tell; taking it back
	// would make acks=all wait on a broker the controller gave up on.
	for _, id := range cmd.ISR {
		if slices.Contains(cur.ISR, id) {
			continue
		}
		if b, ok := c.img.Brokers[id]; !ok || b.State != BrokerAlive {
			state := BrokerState("unregistered")
			if ok {
				state = b.State
			}
			return fmt.Errorf("%w: broker %d is %s (%q/%d)", ErrIneligibleReplica, id, state, cmd.Topic, cmd.Partition)
		}
	}
	return nil
}

// setPartition applies a checked change to t, which the caller owns. The
// partition keeps cmd's ISR: the command was decoded from the log for
// this apply and is dropped after it, and published lists are never
// modified (clipped, so an append copies).
func setPartition(t *Topic, cmd *ChangePartition) *Partition {
	p := &t.Partitions[cmd.Partition]
	old := p.Leader
	p.Leader = cmd.Leader
	p.ISR = slices.Clip(cmd.ISR)
	completeIfCaughtUp(p) // may move the leader off a removed replica
	if p.Leader != old {
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	return p
}

// checkLeaderISR: the ISR is a duplicate-free subset of the replicas, and the
// leader is -1 (offline) or in the ISR.
func checkLeaderISR(replicas []int32, leader int32, isr []int32) error {
	for i, id := range isr {
		if !slices.Contains(replicas, id) || slices.Contains(isr[:i], id) {
			return fmt.Errorf("%w: isr %v, replicas %v", ErrInvalidAssignment, isr, replicas)
		}
	}
	if leader != -1 && !slices.Contains(isr, leader) {
		return fmt.Errorf("%w: leader %d not in isr %v", ErrInvalidAssignment, leader, isr)
	}
	return nil
}

func (c *change) allocateProducerIDs(cmd *AllocateProducerIDs) (any, error) {
	if cmd.Count < 1 {
		return nil, fmt.Errorf("%w: producer id count %d", ErrInvalidCommand, cmd.Count)
	}
	first := c.img.NextProducerID
	if first > math.MaxInt64-cmd.Count {
		return nil, fmt.Errorf("%w: producer ids exhausted", ErrInvalidCommand)
	}
	c.img.NextProducerID = first + cmd.Count
	c.writes = append(c.writes, write{keyNextProducerID, u64(uint64(c.img.NextProducerID))})
	return first, nil
}

func (c *change) initCluster(cmd *InitCluster) (any, error) {
	if c.img.ClusterID != "" {
		return c.img.ClusterID, nil
	}
	if cmd.ClusterID == "" {
		return nil, fmt.Errorf("%w: empty cluster id", ErrInvalidCommand)
	}
	c.img.ClusterID = cmd.ClusterID
	c.writes = append(c.writes, write{keyClusterID, []byte(cmd.ClusterID)})
	return cmd.ClusterID, nil
}

// changePartitionsBatch applies each topic's changes as ChangePartitions
// does; a topic deleted since the batch was proposed is skipped, as a
// stale change is.
func (c *change) changePartitionsBatch(cmd *ChangePartitionsBatch) (any, error) {
	var applied int64
	for i := range cmd.Topics {
		if _, ok := c.img.Topics.Lookup(cmd.Topics[i].Topic); !ok {
			continue
		}
		n, err := c.changePartitions(&cmd.Topics[i])
		if err != nil {
			return nil, err
		}
		applied += n.(int64)
	}
	return applied, nil
}

// setCommandVersion raises the cluster's command version; a version at or
// below the current one changes nothing (the controller may propose it
// twice across a leader change).
func (c *change) setCommandVersion(cmd *SetCommandVersion) (any, error) {
	if cmd.Version > c.img.CommandVersion {
		c.img.CommandVersion = cmd.Version
		c.writes = append(c.writes, write{keyCommandVersion, []byte{cmd.Version}})
	}
	return int64(max(c.img.CommandVersion, 1)), nil
}
