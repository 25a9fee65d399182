package groups

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/runnel/runnel/kafkaproto"
)

// Offsets in transactions. TxnOffsetCommit stages a group's offsets in the
// transaction of a producer (id and epoch): they are written to the
// group's __consumer_offsets partition at once, as records of their own
// kind, so they survive a failover of this coordinator, and kept in
// memory; the transaction's marker for that partition (CompleteTxnOffsets)
// then writes them as the group's offsets together with tombstones of the
// staged records (commit), or only the tombstones (abort), in one batch.
//
//	key   int16 kind 3, group, topic (int16-length-prefixed strings),
//	      int32 partition, int64 producer id
//	value {"v","epoch","offset","leader_epoch","metadata"}; null: ended
//
// Lock order: group.mu, then txnOffsets.mu.

const recordKindTxnOffset int16 = 3

// txnOffsets are the staged offsets of the loaded partitions, per group.
// The zero value is ready.
type txnOffsets struct {
	mu      sync.Mutex
	byGroup map[string]*groupTxnOffsets // guarded by mu
}

type groupTxnOffsets struct {
	partition int32
	byPID     map[int64]*stagedOffsets
}

type stagedOffsets struct {
	epoch   int16
	offsets map[tp]txnOffsetEntry
}

type txnOffsetEntry struct {
	V           int     `json:"v"`
	Epoch       int16   `json:"epoch"`
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Metadata    *string `json:"metadata,omitempty"`
}

func txnOffsetKey(group string, t tp, pid int64) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(recordKindTxnOffset))
	b = appendKeyString(b, group)
	b = appendKeyString(b, t.Topic)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Partition))
	return binary.BigEndian.AppendUint64(b, uint64(pid))
}

// parseTxnOffsetKey decodes a kind 3 key; ok false for other kinds.
func parseTxnOffsetKey(key []byte) (group string, t tp, pid int64, ok bool, err error) {
	if len(key) < 2 || int16(binary.BigEndian.Uint16(key)) != recordKindTxnOffset {
		return "", t, 0, false, nil
	}
	rest := key[2:]
	str := func() (string, bool) {
		if len(rest) < 2 || len(rest) < 2+int(binary.BigEndian.Uint16(rest)) {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(rest))
		s := string(rest[2 : 2+n])
		rest = rest[2+n:]
		return s, true
	}
	g, ok1 := str()
	topic, ok2 := str()
	if !ok1 || !ok2 || len(rest) != 12 {
		return "", t, 0, true, fmt.Errorf("%w: transactional offset key", errBadGroupRecord)
	}
	t = tp{Topic: topic, Partition: int32(binary.BigEndian.Uint32(rest))}
	return g, t, int64(binary.BigEndian.Uint64(rest[4:])), true, nil
}

// replayTxnOffset applies a kind 3 record read at load to pend; it reports
// whether r was one.
func (c *Coordinator) replayTxnOffset(r Record, partition int32, pend map[string]*groupTxnOffsets) bool {
	group, t, pid, ok, err := parseTxnOffsetKey(r.Key)
	if !ok {
		return false
	}
	if err != nil {
		c.logger.Warn("skipping __consumer_offsets record", "offset", r.Offset, "err", err)
		return true
	}
	gt := pend[group]
	if gt == nil {
		gt = &groupTxnOffsets{partition: partition, byPID: map[int64]*stagedOffsets{}}
		pend[group] = gt
	}
	st := gt.byPID[pid]
	if r.Value == nil {
		if st != nil {
			delete(st.offsets, t)
			if len(st.offsets) == 0 {
				delete(gt.byPID, pid)
			}
		}
		return true
	}
	var e txnOffsetEntry
	if err := json.Unmarshal(r.Value, &e); err != nil {
		c.logger.Warn("skipping transactional offset record", "offset", r.Offset, "err", err)
		return true
	}
	if st == nil || e.Epoch > st.epoch {
		st = &stagedOffsets{epoch: e.Epoch, offsets: map[tp]txnOffsetEntry{}}
		gt.byPID[pid] = st
	}
	st.offsets[t] = e
	return true
}

// installTxnOffsets replaces the staged offsets of partition's groups by
// those a load found.
func (c *Coordinator) installTxnOffsets(partition int32, pend map[string]*groupTxnOffsets) {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	for g, gt := range c.txn.byGroup {
		if gt.partition == partition {
			delete(c.txn.byGroup, g)
		}
	}
	if c.txn.byGroup == nil {
		c.txn.byGroup = map[string]*groupTxnOffsets{}
	}
	for g, gt := range pend {
		if len(gt.byPID) > 0 {
			c.txn.byGroup[g] = gt
		}
	}
}

// StageTxnOffsets is TxnOffsetCommit: it checks this broker coordinates
// the group and, when the request names a member (KIP-447, v3+), that it
// is one of the current generation (a zombie consumer cannot commit);
// then it writes the offsets as staged in producer pid's transaction and
// returns once they are stored. The result holds one error per offset.
// An epoch older than one the producer staged with is PRODUCER_FENCED.
func (c *Coordinator) StageTxnOffsets(ctx context.Context, ref kafkaproto.MemberRef, pid int64, epoch int16,
	offsets []kafkaproto.CommitOffset) ([]error, error) {
	g, err := c.lookup(ctx, ref.Group, true)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if ref.Generation >= 0 || ref.MemberID != "" {
		if _, err := g.checkMemberLocked(ref); err != nil {
			g.mu.Unlock()
			return nil, err
		}
	}
	if cur, ok := c.stagedEpoch(g.name, pid); ok && epoch < cur {
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: producer %d staged offsets at epoch %d, not %d", kafkaproto.ErrProducerFenced, pid, cur, epoch)
	}
	errs := make([]error, len(offsets))
	var recs []Record
	entries := map[tp]txnOffsetEntry{}
	now := c.now().UnixMilli()
	for i, o := range offsets {
		if o.Metadata != nil && len(*o.Metadata) > groupMaxMetadataBytes {
			errs[i] = fmt.Errorf("%w: %d bytes", kafkaproto.ErrOffsetMetadataTooLarge, len(*o.Metadata))
			continue
		}
		e := txnOffsetEntry{V: storeVersion, Epoch: epoch, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
		val, err := json.Marshal(e)
		if err != nil {
			errs[i] = err
			continue
		}
		entries[o.TopicPartition] = e
		recs = append(recs, Record{Key: txnOffsetKey(g.name, o.TopicPartition, pid), Value: val, Timestamp: now})
	}
	if len(recs) == 0 {
		g.mu.Unlock()
		return errs, nil
	}
	written := g.enqueueWaitLocked(recs, func(err error) {
		if err == nil {
			c.stage(g, pid, epoch, entries)
		}
	})
	g.mu.Unlock()
	select {
	case err := <-written:
		return errs, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Coordinator) stagedEpoch(group string, pid int64) (int16, bool) {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	if gt := c.txn.byGroup[group]; gt != nil {
		if st := gt.byPID[pid]; st != nil {
			return st.epoch, true
		}
	}
	return 0, false
}

// stage records written offsets (under g.mu).
func (c *Coordinator) stage(g *group, pid int64, epoch int16, entries map[tp]txnOffsetEntry) {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	if c.txn.byGroup == nil {
		c.txn.byGroup = map[string]*groupTxnOffsets{}
	}
	gt := c.txn.byGroup[g.name]
	if gt == nil {
		gt = &groupTxnOffsets{partition: g.partition, byPID: map[int64]*stagedOffsets{}}
		c.txn.byGroup[g.name] = gt
	}
	st := gt.byPID[pid]
	if st == nil || epoch > st.epoch {
		st = &stagedOffsets{epoch: epoch, offsets: map[tp]txnOffsetEntry{}}
		gt.byPID[pid] = st
	}
	for t, e := range entries {
		st.offsets[t] = e
	}
}

// PendingTxnOffset reports whether an open transaction staged an offset
// of group for t.
func (c *Coordinator) PendingTxnOffset(group string, t kafkaproto.TopicPartition) bool {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	if gt := c.txn.byGroup[group]; gt != nil {
		for _, st := range gt.byPID {
			if _, ok := st.offsets[t]; ok {
				return true
			}
		}
	}
	return false
}

// CompleteTxnOffsets is a transaction marker for partition of
// __consumer_offsets, which this broker must coordinate: the offsets
// producer pid staged for its groups become their committed offsets
// (commit) or are dropped, durably, before it returns.
func (c *Coordinator) CompleteTxnOffsets(ctx context.Context, pid int64, commit bool, partition int32) error {
	c.mu.Lock()
	sh, ok := c.shards[partition]
	switch {
	case c.closed:
		c.mu.Unlock()
		return errGroupClosed
	case !ok:
		c.mu.Unlock()
		return errGroupNotCoordinator
	case !sh.loaded:
		c.mu.Unlock()
		return errGroupLoading
	}
	var names []string
	c.txn.mu.Lock()
	for name, gt := range c.txn.byGroup {
		if gt.partition == partition && gt.byPID[pid] != nil {
			names = append(names, name)
		}
	}
	c.txn.mu.Unlock()
	sort.Strings(names)
	var gs []*group
	for _, name := range names {
		g := c.groups[name]
		if g == nil {
			g = newGroup(c, name, partition)
			c.groups[name] = g
		}
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		if err := c.completeGroupTxn(ctx, g, pid, commit); err != nil {
			return err
		}
	}
	return nil
}

// completeGroupTxn ends pid's staged offsets of one group.
func (c *Coordinator) completeGroupTxn(ctx context.Context, g *group, pid int64, commit bool) error {
	g.mu.Lock()
	c.txn.mu.Lock()
	var st *stagedOffsets
	if gt := c.txn.byGroup[g.name]; gt != nil {
		st = gt.byPID[pid]
	}
	c.txn.mu.Unlock()
	if st == nil {
		g.mu.Unlock()
		return nil // ended by an earlier marker
	}
	now := c.now().UnixMilli()
	var recs []Record
	applied := map[tp]offsetEntry{}
	ts := make([]tp, 0, len(st.offsets))
	for t := range st.offsets {
		ts = append(ts, t)
	}
	sortTPs(ts)
	for _, t := range ts {
		e := st.offsets[t]
		if commit && g.state != stateDead {
			oe := offsetEntry{V: storeVersion, Offset: e.Offset, LeaderEpoch: e.LeaderEpoch, Metadata: e.Metadata, CommitMS: now}
			val, err := json.Marshal(oe)
			if err != nil {
				g.mu.Unlock()
				return err
			}
			recs = append(recs, Record{Key: offsetKey(g.name, t), Value: val, Timestamp: now})
			applied[t] = oe
		}
		recs = append(recs, Record{Key: txnOffsetKey(g.name, t, pid), Timestamp: now}) // tombstone
	}
	written := g.enqueueWaitLocked(recs, func(err error) {
		if err != nil {
			return
		}
		for t, oe := range applied {
			g.offsets[t] = oe
		}
		c.txn.mu.Lock()
		if gt := c.txn.byGroup[g.name]; gt != nil && gt.byPID[pid] == st {
			delete(gt.byPID, pid)
			if len(gt.byPID) == 0 {
				delete(c.txn.byGroup, g.name)
			}
		}
		c.txn.mu.Unlock()
	})
	g.mu.Unlock()
	return awaitWrite(ctx, written)
}
