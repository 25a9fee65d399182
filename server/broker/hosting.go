package broker

import (
	"fmt"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

// Partitions made on first use (issue 19). The metadata image the broker
// applied last (Broker.img) is the truth about which partitions live here,
// their leaders, epochs and configs; a Partition (the replica's in-memory
// state: leadership, high watermark, producers, its lazy log) is made only
// when something needs one: a produce, read or describe through Lookup,
// Partition or PartitionsOf, a follower's fetch of it, and, at reconcile,
// a replica this broker follows (its fetcher must run whether anyone asks
// or not). So a restart with a million partitions placed here applies the
// image and makes none: it used to make a Partition per replica, most of
// the restart's CPU (allocation and GC), and ~440 heap bytes each.
//
// Once made, a Partition stays until its topic is deleted (or re-created
// under the same name) or the replica moves away; reconcile applies every
// later image to it. Making one takes Broker.mu for writing, so it is
// ordered with reconcile: a Partition is always made from the image
// reconcile applied last, and a topic's deletion (which deletes the made
// ones' logs, and the directories of the others: a log written before a
// restart and not used since has one) never misses one made meanwhile.

// hostedTopic is the partitions of one topic made on this broker, and the
// topic's metadata and configs as reconcile last applied them.
type hostedTopic struct {
	id      [16]byte
	parts   map[int32]*Partition
	applied *raftfsm.Topic // the metadata last applied to parts
	// cfg and pc are applied's configs, read once per topic (not per
	// partition) and shared by its partitions.
	cfg *segments.Config
	pc  partitionConfig
}

// setConfigs reads t's configs for the topic's partitions.
func (ht *hostedTopic) setConfigs(t *raftfsm.Topic, b *Broker) {
	cfg := topicconfig.LogConfig(t.Configs)
	cfg.MaxInflatedBytes, cfg.FramingOnly = b.maxInflated, b.framingOnly
	ht.cfg, ht.pc = &cfg, partitionConfigOf(t.Configs)
}

// partitionLocked returns partition idx of t (a topic of b.img, placing
// that partition here), making it if it was not made yet. Called with b.mu
// held for writing.
func (b *Broker) partitionLocked(t *raftfsm.Topic, idx int32) *Partition {
	ht, ok := b.topics[t.Name]
	if !ok {
		ht = &hostedTopic{id: t.ID, parts: map[int32]*Partition{}, applied: t}
		ht.setConfigs(t, b)
		b.topics[t.Name] = ht
	}
	if p, ok := ht.parts[idx]; ok {
		return p
	}
	p := newPartitionWith(t.Name, idx, t.ID, nil, ht.pc)
	p.lazy.owner = b
	p.lazy.cfg.Store(ht.cfg)
	p.maxRecordBytes = max(consumeMaxRecordBytes, b.maxInflated)
	p.producerPolicy, p.keyPolicyCfg = b.producers, b.keys
	p.leaseValid, p.now = b.lease, b.now
	p.disk = b.disk
	p.readBufs = &b.readBufs
	p.setMeta(t.Partitions[idx], b.id)
	ht.parts[idx] = p
	b.roleChanged(p)
	return p
}

// lookup returns a hosted partition replica, made now if this is its first
// use, its log open or not.
func (b *Broker) lookup(topic string, idx int32) (*Partition, error) {
	b.mu.RLock()
	p, err := b.madeLocked(topic, idx)
	b.mu.RUnlock()
	if p != nil || err != nil {
		return p, err
	}
	// Placed here and not made yet: make it under the write lock, from
	// the image applied by then (a reconcile may have run in between).
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, err := b.madeLocked(topic, idx); p != nil || err != nil {
		return p, err
	}
	t, _ := b.img.Topics.Lookup(topic)
	return b.partitionLocked(t, idx), nil
}

// madeLocked returns partition idx of topic if it was made; nil and no
// error if b.img places it here but it was not made; an error if it is not
// hosted here. Called with b.mu held.
func (b *Broker) madeLocked(topic string, idx int32) (*Partition, error) {
	if b.closed {
		return nil, ErrShuttingDown
	}
	if ht, ok := b.topics[topic]; ok {
		if p, ok := ht.parts[idx]; ok {
			return p, nil
		}
	}
	var t *raftfsm.Topic
	if b.img != nil {
		t, _ = b.img.Topics.Lookup(topic)
	}
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	case idx < 0 || int(idx) >= len(t.Partitions):
		return nil, fmt.Errorf("%w: %s has no partition %d", ErrUnknownPartition, topic, idx)
	case !containsID(t.Partitions[idx].Replicas, b.id):
		return nil, fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeader, topic, idx, t.Partitions[idx].Leader)
	}
	return nil, nil
}

// placedLocked reports whether partition idx of topic lives here (made or
// not). Called with b.mu held.
func (b *Broker) placedLocked(topic string, idx int32) bool {
	p, err := b.madeLocked(topic, idx)
	return p != nil || err == nil
}

// PartitionsOf returns the hosted partitions of a topic sorted by index,
// their logs open or not (SizeBytes and Offsets read them without opening
// an empty one). It makes those not made yet.
func (b *Broker) PartitionsOf(topic string) []*Partition {
	if b == nil { // a controller-only node hosts nothing
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.img == nil {
		return nil
	}
	t, ok := b.img.Topics.Lookup(topic)
	if !ok {
		return nil
	}
	var out []*Partition
	for i, pm := range t.Partitions {
		if containsID(pm.Replicas, b.id) {
			out = append(out, b.partitionLocked(t, int32(i)))
		}
	}
	return out // in index order
}

// HostedCount is how many partitions the metadata places on this broker,
// made or not (counted once per image).
func (b *Broker) HostedCount() int {
	if b == nil {
		return 0
	}
	if n := b.hostedCount.Load(); n >= 0 {
		return int(n)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	if b.img != nil {
		for _, t := range b.img.Topics.All() {
			for _, pm := range t.Partitions {
				if containsID(pm.Replicas, b.id) {
					n++
				}
			}
		}
	}
	b.hostedCount.Store(int64(n))
	return n
}
