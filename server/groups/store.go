package groups

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// Records of __consumer_offsets. Kafka's layout of keys (so compaction keeps
// the latest record per group and per group/topic/partition), runnel's own
// values:
//
//	key   int16 kind (1 offset commit, 2 group metadata), then big-endian
//	      int16-length-prefixed UTF-8 strings and int32s:
//	      kind 1: group, topic, partition     kind 2: group
//	value a JSON object whose "v" is its version (1); null is a tombstone
//	      (the offset or the whole group was deleted)
//	      kind 1: {"v","offset","leader_epoch","metadata","commit_ms"}
//	      kind 2: {"v","protocol_type","generation","protocol","leader",
//	               "members":[{"id","instance_id","client_id","host",
//	                 "session_ms","rebalance_ms","protocols":[{"name","metadata"}],
//	                 "assignment","http":{"topics","reset"}}]}
//	      ([]byte fields are base64, as encoding/json writes them)

const (
	groupStoreTimeout = 10 * time.Second // an acks=all append of group records
	groupLoadWait     = 5 * time.Second  // for the high watermark before a load

	recordKindOffset int16 = 1
	recordKindGroup  int16 = 2
	storeVersion           = 1
)

var errBadGroupRecord = errors.New("malformed __consumer_offsets record")

// errLoadBehind: the partition's high watermark trails its log end; a load
// waits (retried at the next tick), which is expected after a leader change.
var errLoadBehind = errors.New("high watermark below the log end")

// offsetEntry is one committed offset.
type offsetEntry struct {
	V           int     `json:"v"`
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Metadata    *string `json:"metadata,omitempty"`
	CommitMS    int64   `json:"commit_ms"`
}

type storedGroup struct {
	V            int            `json:"v"`
	ProtocolType string         `json:"protocol_type"`
	Generation   int32          `json:"generation"`
	Protocol     string         `json:"protocol"`
	Leader       string         `json:"leader"`
	Members      []storedMember `json:"members"`
}

type storedMember struct {
	ID          string                     `json:"id"`
	InstanceID  *string                    `json:"instance_id,omitempty"`
	ClientID    string                     `json:"client_id"`
	Host        string                     `json:"host"`
	SessionMS   int64                      `json:"session_ms"`
	RebalanceMS int64                      `json:"rebalance_ms"`
	Protocols   []kafkaproto.GroupProtocol `json:"protocols"`
	Assignment  []byte                     `json:"assignment"`
	HTTP        *storedHTTPMember          `json:"http,omitempty"`
}

type storedHTTPMember struct {
	Topics []string `json:"topics"`
	Reset  string   `json:"reset"`
}

func appendKeyString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func offsetKey(group string, t tp) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(recordKindOffset))
	b = appendKeyString(b, group)
	b = appendKeyString(b, t.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(t.Partition))
}

func groupKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(recordKindGroup))
	return appendKeyString(b, group)
}

// parseGroupKey decodes a key; t is set for offset keys.
func parseGroupKey(key []byte) (kind int16, group string, t tp, err error) {
	readString := func() (string, bool) {
		if len(key) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(key))
		if len(key) < 2+n {
			return "", false
		}
		s := string(key[2 : 2+n])
		key = key[2+n:]
		return s, true
	}
	if len(key) < 2 {
		return 0, "", t, errBadGroupRecord
	}
	kind = int16(binary.BigEndian.Uint16(key))
	key = key[2:]
	var ok bool
	if group, ok = readString(); !ok {
		return 0, "", t, errBadGroupRecord
	}
	switch kind {
	case recordKindGroup:
		if len(key) != 0 {
			return 0, "", t, errBadGroupRecord
		}
	case recordKindOffset:
		if t.Topic, ok = readString(); !ok || len(key) != 4 {
			return 0, "", t, errBadGroupRecord
		}
		t.Partition = int32(binary.BigEndian.Uint32(key))
	default:
		return 0, "", t, fmt.Errorf("%w: key kind %d", errBadGroupRecord, kind)
	}
	return kind, group, t, nil
}

// persistLocked queues the group's metadata record (members and their
// assignments, as they are now), so a new coordinator resumes the
// generation; done (may be nil) runs under g.mu with the outcome.
func (g *group) persistLocked(done func(err error)) {
	sg := storedGroup{V: storeVersion, ProtocolType: g.protocolType, Generation: g.generation,
		Protocol: g.protocol, Leader: g.leader, Members: []storedMember{}}
	for _, id := range g.sortedMemberIDsLocked() {
		m := g.members[id]
		sm := storedMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, Host: m.host,
			SessionMS: m.sessionTimeout.Milliseconds(), RebalanceMS: m.rebalanceTimeout.Milliseconds(),
			Protocols: m.protocols, Assignment: m.assignment}
		if m.http != nil {
			sm.HTTP = &storedHTTPMember{Topics: m.http.topics, Reset: m.http.reset}
		}
		sg.Members = append(sg.Members, sm)
	}
	val, err := json.Marshal(sg)
	if err != nil { // not for these types; failed like a write
		g.metaDirty = true
		if done != nil {
			done(err)
		}
		return
	}
	g.enqueueLocked(&groupWrite{recs: []Record{{Key: groupKey(g.name), Value: val, Timestamp: g.c.now().UnixMilli()}},
		meta: true, done: done})
}

// loadPartition reads an offsets partition from its start and rebuilds its
// groups. Members come back with a fresh session: those that keep
// heartbeating with their generation carry on without a rebalance.
func (c *Coordinator) loadPartition(ctx context.Context, idx int32) (map[string]*group, error) {
	p, err := c.b.OffsetsLog(idx)
	if err != nil {
		return nil, err
	}
	// A new leader's high watermark may trail its log end until the
	// followers have fetched; loading below it could miss commits that
	// were acknowledged, so offsets would go back. Wait (the caller
	// retries at its next tick; clients see COORDINATOR_LOAD_IN_PROGRESS).
	if err := waitLoadable(ctx, p); err != nil {
		return nil, fmt.Errorf("%s-%d: %w", offsetsTopic, idx, err)
	}
	metas := map[string]*storedGroup{}
	offsets := map[string]map[tp]offsetEntry{}
	pend := map[string]*groupTxnOffsets{} // txnoffsets.go
	for off := p.StartOffset(); ; {
		recs, next, hwm, err := p.ReadRecords(off, 1000, 4<<20)
		for _, r := range recs {
			if !c.replayTxnOffset(r, idx, pend) {
				c.replay(r, metas, offsets)
			}
		}
		if err != nil {
			// A batch that cannot be decoded would keep every group of
			// this partition "loading" forever: skip it, loudly.
			end, serr := p.BatchEnd(next)
			if serr != nil {
				return nil, fmt.Errorf("read %s-%d at %d: %w", offsetsTopic, idx, next, err)
			}
			c.logger.Warn("skipping unreadable __consumer_offsets batch", "partition", idx,
				"offset", next, "next", end, "err", err)
			next = end
		}
		if next <= off || next >= hwm {
			break
		}
		off = next
	}
	groups := map[string]*group{}
	get := func(name string) *group {
		g, ok := groups[name]
		if !ok {
			g = newGroup(c, name, idx)
			groups[name] = g
		}
		return g
	}
	for name, offs := range offsets {
		if len(offs) > 0 {
			get(name).offsets = offs
		}
	}
	now := c.now()
	for name, sg := range metas {
		g := get(name)
		g.restore(sg, now)
	}
	c.installTxnOffsets(idx, pend)
	return groups, nil
}

// waitLoadable waits (up to groupLoadWait, woken by the partition) for
// the high watermark to reach the log end.
func waitLoadable(ctx context.Context, p Log) error {
	timer := time.NewTimer(groupLoadWait)
	defer timer.Stop()
	for {
		changed := p.Changed()
		hwm, end := p.HighWatermark(), p.EndOffset()
		if hwm >= end {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("%w: %d < %d", errLoadBehind, hwm, end)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Coordinator) replay(r Record, metas map[string]*storedGroup, offsets map[string]map[tp]offsetEntry) {
	kind, name, t, err := parseGroupKey(r.Key)
	if err != nil {
		c.logger.Warn("skipping __consumer_offsets record", "offset", r.Offset, "err", err)
		return
	}
	switch kind {
	case recordKindOffset:
		if offsets[name] == nil {
			offsets[name] = map[tp]offsetEntry{}
		}
		if r.Value == nil {
			delete(offsets[name], t)
			return
		}
		var e offsetEntry
		if err := json.Unmarshal(r.Value, &e); err != nil {
			c.logger.Warn("skipping offset record", "offset", r.Offset, "err", err)
			return
		}
		offsets[name][t] = e
	case recordKindGroup:
		if r.Value == nil {
			delete(metas, name)
			delete(offsets, name)
			return
		}
		var sg storedGroup
		if err := json.Unmarshal(r.Value, &sg); err != nil {
			c.logger.Warn("skipping group record", "offset", r.Offset, "err", err)
			return
		}
		metas[name] = &sg
	}
}

// restore installs a stored generation.
func (g *group) restore(sg *storedGroup, now time.Time) {
	g.protocolType, g.generation, g.protocol, g.leader = sg.ProtocolType, sg.Generation, sg.Protocol, sg.Leader
	for _, sm := range sg.Members {
		m := &member{id: sm.ID, instanceID: sm.InstanceID, clientID: sm.ClientID, host: sm.Host,
			sessionTimeout: time.Duration(sm.SessionMS) * time.Millisecond, rebalanceTimeout: time.Duration(sm.RebalanceMS) * time.Millisecond,
			protocols: sm.Protocols, assignment: sm.Assignment}
		m.deadline = now.Add(m.sessionTimeout)
		if sm.HTTP != nil {
			m.http = newHTTPMember(sm.HTTP.Topics, sm.HTTP.Reset)
			m.http.assigned(m, g.generation)
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.instances[*m.instanceID] = m.id
		}
	}
	if len(g.members) > 0 {
		g.state = stateStable
	} else {
		g.state = stateEmpty
	}
}
