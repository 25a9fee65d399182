package groups

import (
	"context"
	"fmt"
	"sort"

	"github.com/runnel/runnel/kafkaproto"
)

// commit is OffsetCommit: checks the member as Kafka does, then appends
// every accepted offset in one batch and waits for it (or ctx: the write
// still applies when it completes). The result holds one error per offset;
// err fails them all.
func (g *group) commit(ctx context.Context, ref kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, error) {
	errs, written, err := g.checkAndStoreOffsets(ref, offsets)
	if err != nil || written == nil {
		return errs, err
	}
	if err := awaitWrite(ctx, written); err != nil {
		return nil, err
	}
	return errs, nil
}

// awaitWrite waits for a write to the offsets topic (a channel of
// enqueueWaitLocked) or for ctx: a write given up on still applies when it
// completes.
func awaitWrite(ctx context.Context, written <-chan error) error {
	select {
	case err := <-written:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *group) checkAndStoreOffsets(ref kafkaproto.MemberRef, offsets []kafkaproto.CommitOffset) ([]error, <-chan error, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		return nil, nil, errGroupNotCoordinator
	case ref.Generation < 0 && ref.MemberID == "" && g.state == stateEmpty:
		// A commit from outside group management (admin, manual assignment).
	case g.state == stateCompletingRebalance:
		return nil, nil, kafkaproto.ErrRebalanceInProgress
	default:
		m, err := g.checkMemberLocked(ref)
		if err != nil {
			return nil, nil, err
		}
		m.deadline = g.c.now().Add(m.sessionTimeout)
	}
	errs, written := g.storeOffsetsLocked(offsets)
	return errs, written, nil
}

// storeOffsetsLocked queues offsets, applied once written; written is nil
// when none was accepted.
func (g *group) storeOffsetsLocked(offsets []kafkaproto.CommitOffset) (errs []error, written <-chan error) {
	errs = make([]error, len(offsets))
	now := g.c.now().UnixMilli()
	var recs []Record
	var keep []int
	entries := make([]offsetEntry, len(offsets))
	for i, o := range offsets {
		if o.Metadata != nil && len(*o.Metadata) > groupMaxMetadataBytes {
			errs[i] = fmt.Errorf("%w: %d bytes", kafkaproto.ErrOffsetMetadataTooLarge, len(*o.Metadata))
			continue
		}
		entries[i] = offsetEntry{V: storeVersion, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitMS: now}
		val, err := jsonValue(entries[i])
		if err != nil {
			errs[i] = err
			continue
		}
		recs = append(recs, Record{Key: offsetKey(g.name, o.TopicPartition), Value: val, Timestamp: now})
		keep = append(keep, i)
	}
	if len(recs) == 0 {
		return errs, nil
	}
	return errs, g.enqueueWaitLocked(recs, func(err error) {
		if err != nil {
			return
		}
		for _, i := range keep {
			g.offsets[offsets[i].TopicPartition] = entries[i]
		}
	})
}

// fetchOffsets is OffsetFetch; parts nil means every committed offset.
func (g *group) fetchOffsets(parts []tp) []kafkaproto.CommittedOffset {
	g.mu.Lock()
	defer g.mu.Unlock()
	if parts == nil {
		for t := range g.offsets {
			parts = append(parts, t)
		}
		sortTPs(parts)
	}
	out := make([]kafkaproto.CommittedOffset, 0, len(parts))
	for _, t := range parts {
		co := kafkaproto.CommittedOffset{TopicPartition: t, Offset: -1, LeaderEpoch: -1}
		if e, ok := g.offsets[t]; ok {
			co.Offset, co.LeaderEpoch, co.Metadata = e.Offset, e.LeaderEpoch, e.Metadata
		}
		out = append(out, co)
	}
	return out
}

func sortTPs(parts []tp) {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
}

// subscribedTopicsLocked are the topics the members consume, from their
// consumer-protocol metadata (HTTP members: their topics).
func (g *group) subscribedTopicsLocked() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		if m.http != nil {
			for _, t := range m.http.topics {
				out[t] = true
			}
			continue
		}
		if g.protocolType != "consumer" {
			continue
		}
		for _, t := range decodeSubscription(m.metadataFor(g.protocol)) {
			out[t] = true
		}
		for _, a := range decodeAssignment(m.assignment) {
			out[a.Topic] = true
		}
	}
	return out
}

// deleteOffsets is OffsetDelete: offsets of topics still consumed stay.
func (g *group) deleteOffsets(ctx context.Context, parts []tp) ([]error, error) {
	g.mu.Lock()
	if g.state == stateDead {
		g.mu.Unlock()
		return nil, errGroupNotCoordinator
	}
	subscribed := g.subscribedTopicsLocked()
	errs := make([]error, len(parts))
	var recs []Record
	var del []tp
	now := g.c.now().UnixMilli()
	for i, t := range parts {
		if subscribed[t.Topic] {
			errs[i] = fmt.Errorf("%w: %s", kafkaproto.ErrGroupSubscribedToTopic, t.Topic)
			continue
		}
		if _, ok := g.offsets[t]; ok {
			recs = append(recs, Record{Key: offsetKey(g.name, t), Timestamp: now})
			del = append(del, t)
		}
	}
	if len(recs) == 0 {
		g.mu.Unlock()
		return errs, nil
	}
	written := g.enqueueWaitLocked(recs, func(err error) {
		if err != nil {
			return
		}
		for _, t := range del {
			delete(g.offsets, t)
		}
	})
	g.mu.Unlock()
	if err := awaitWrite(ctx, written); err != nil {
		return nil, err
	}
	return errs, nil
}

// deleteGroup writes tombstones for an empty group and its offsets. The
// group is Dead while they are written (no member joins a group being
// deleted), Empty again if the write fails. It waits for the write without
// a request context (the write is bounded by groupStoreTimeout and Close),
// so the caller forgets the group only once it is deleted.
func (g *group) deleteGroup() error {
	g.mu.Lock()
	switch g.state {
	case stateDead:
		g.mu.Unlock()
		return fmt.Errorf("%w: %s", kafkaproto.ErrGroupIDNotFound, g.name)
	case stateEmpty:
	default:
		g.mu.Unlock()
		return fmt.Errorf("%w: %s has %d members", kafkaproto.ErrNonEmptyGroup, g.name, len(g.members))
	}
	now := g.c.now().UnixMilli()
	recs := []Record{{Key: groupKey(g.name), Timestamp: now}}
	for t := range g.offsets {
		recs = append(recs, Record{Key: offsetKey(g.name, t), Timestamp: now})
	}
	g.setStateLocked(stateDead)
	written := g.enqueueWaitLocked(recs, func(err error) {
		if err != nil {
			g.setStateLocked(stateEmpty)
			return
		}
		g.offsets = map[tp]offsetEntry{}
	})
	g.mu.Unlock()
	return <-written
}

// describe is DescribeGroups for one group.
func (g *group) describe() kafkaproto.GroupDescription {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := kafkaproto.GroupDescription{Group: g.name, State: string(g.state), ProtocolType: g.protocolType}
	if g.state == stateStable || g.state == stateCompletingRebalance {
		d.Protocol = g.protocol
	}
	for _, id := range g.sortedMemberIDsLocked() {
		m := g.members[id]
		gm := kafkaproto.GroupMember{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.host}
		if g.state == stateStable {
			gm.Metadata, gm.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		d.Members = append(d.Members, gm)
	}
	return d
}
