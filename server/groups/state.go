package groups

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// groupState is a group's place in the classic rebalance protocol, with
// Kafka's names.
type groupState string

const (
	stateEmpty               groupState = "Empty"
	statePreparingRebalance  groupState = "PreparingRebalance"
	stateCompletingRebalance groupState = "CompletingRebalance"
	stateStable              groupState = "Stable"
	stateDead                groupState = "Dead"
)

// group is one consumer group. Every field below mu is guarded by it.
type group struct {
	c         *Coordinator
	name      string
	partition int32 // of __consumer_offsets

	mu                sync.Mutex
	state             groupState
	protocolType      string
	protocol          string
	generation        int32
	leader            string
	members           map[string]*member
	pending           map[string]time.Time // ids handed out with MEMBER_ID_REQUIRED -> expiry
	instances         map[string]string    // group.instance.id -> member id
	rebalanceDeadline time.Time
	delayed           bool // the rebalance waits out the initial delay
	offsets           map[tp]offsetEntry
	changed           chan struct{} // closed and replaced at every state change

	writes    []*groupWrite // records waiting for the flusher, oldest first (writes.go)
	flushing  bool          // a flusher goroutine writes the queue
	metaDirty bool          // the last metadata write failed: the tick writes it again
}

type tp = kafkaproto.TopicPartition

// member is one group member: a Kafka client, or an HTTP consumer the
// coordinator runs the protocol for (http non-nil).
type member struct {
	id               string
	instanceID       *string
	clientID, host   string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []kafkaproto.GroupProtocol
	assignment       []byte
	deadline         time.Time // session expiry
	awaitingJoin     bool
	joinCh           chan joinOutcome // Kafka member blocked in JoinGroup
	syncCh           chan syncOutcome // Kafka member blocked in SyncGroup
	http             *httpMember
}

type joinOutcome struct {
	res kafkaproto.JoinResult
	err error
}

type syncOutcome struct {
	res kafkaproto.SyncResult
	err error
}

func newGroup(c *Coordinator, name string, partition int32) *group {
	return &group{c: c, name: name, partition: partition, state: stateEmpty,
		members: map[string]*member{}, pending: map[string]time.Time{}, instances: map[string]string{},
		offsets: map[tp]offsetEntry{}, changed: make(chan struct{})}
}

func (g *group) setStateLocked(st groupState) {
	g.state = st
	close(g.changed)
	g.changed = make(chan struct{})
}

// unloadLocked fails every waiter: the group moved or the node stops.
func (g *group) unloadLocked(err error) {
	for _, m := range g.members {
		g.failWaitersLocked(m, err)
	}
	g.members = map[string]*member{}
	g.setStateLocked(stateDead)
}

func (g *group) failWaitersLocked(m *member, err error) {
	if m.joinCh != nil {
		m.joinCh <- joinOutcome{res: kafkaproto.JoinResult{MemberID: m.id}, err: err}
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- syncOutcome{err: err}
		m.syncCh = nil
	}
	m.awaitingJoin = false
}

// checkSessionTimeout bounds a joining member's session timeout by
// --group-min/max-session-timeout, before any protocol check, as Kafka
// does. Zero bounds (a Config not from DefaultConfig) take the defaults.
func (c *Coordinator) checkSessionTimeout(ms int32) error {
	lo, hi := c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout
	if lo <= 0 {
		lo = groupMinSessionTimeout
	}
	if hi <= 0 {
		hi = groupMaxSessionTimeout
	}
	if d := time.Duration(ms) * time.Millisecond; d < lo || d > hi {
		return fmt.Errorf("%w: %v not in [%v, %v] (--group-min-session-timeout, --group-max-session-timeout)", kafkaproto.ErrInvalidSessionTimeout, d, lo, hi)
	}
	return nil
}

// supportsLocked reports whether a joining member's protocols fit the group.
func (g *group) supportsLocked(ptype string, protocols []kafkaproto.GroupProtocol) bool {
	if ptype == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if ptype != g.protocolType {
		return false
	}
	cands := g.candidatesLocked()
	for _, p := range protocols {
		if cands[p.Name] {
			return true
		}
	}
	return false
}

// candidatesLocked are the protocols every member supports.
func (g *group) candidatesLocked() map[string]bool {
	var out map[string]bool
	for _, m := range g.members {
		have := map[string]bool{}
		for _, p := range m.protocols {
			if out == nil || out[p.Name] {
				have[p.Name] = true
			}
		}
		out = have
	}
	return out
}

// join is JoinGroup: it registers the member and waits for the rebalance
// to complete.
func (g *group) join(ctx context.Context, req kafkaproto.JoinRequest, hm *httpMember) (kafkaproto.JoinResult, error) {
	if err := g.c.checkSessionTimeout(req.SessionTimeout); err != nil {
		return kafkaproto.JoinResult{MemberID: req.MemberID}, err
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	g.mu.Lock()
	ch, res, err := g.joinLocked(req, hm)
	g.mu.Unlock()
	if ch == nil {
		return res, err
	}
	select {
	case out := <-ch:
		return out.res, out.err
	case <-ctx.Done():
		return kafkaproto.JoinResult{MemberID: res.MemberID}, ctx.Err()
	}
}

// joinLocked returns either a channel to wait on or an immediate answer.
func (g *group) joinLocked(req kafkaproto.JoinRequest, hm *httpMember) (chan joinOutcome, kafkaproto.JoinResult, error) {
	now := g.c.now()
	res := kafkaproto.JoinResult{MemberID: req.MemberID}
	if g.state == stateDead {
		return nil, res, errGroupNotCoordinator
	}
	if !g.supportsLocked(req.ProtocolType, req.Protocols) {
		return nil, res, fmt.Errorf("%w: protocol type %q, protocols %v", kafkaproto.ErrInconsistentGroupProtocol, req.ProtocolType, protocolNames(req.Protocols))
	}
	m := g.members[req.MemberID]
	if req.InstanceID != nil {
		if old, ok := g.instances[*req.InstanceID]; ok && req.MemberID != "" && old != req.MemberID {
			return nil, res, fmt.Errorf("%w: instance %s is member %s", kafkaproto.ErrFencedInstanceID, *req.InstanceID, old)
		}
	}
	switch {
	case req.MemberID == "" && req.InstanceID != nil:
		// A static member (re)joining: it takes over its instance's slot.
		id := g.c.newMemberID(req.ClientID)
		if old, ok := g.instances[*req.InstanceID]; ok {
			if om := g.members[old]; om != nil {
				g.failWaitersLocked(om, fmt.Errorf("%w: replaced by a new member with the same instance id", kafkaproto.ErrFencedInstanceID))
				delete(g.members, old)
				if g.leader == old {
					g.leader = id
				}
			}
		}
		res.MemberID = id
		m = &member{id: id, instanceID: req.InstanceID}
		g.members[id] = m
		g.instances[*req.InstanceID] = id
	case req.MemberID == "" && req.RequireKnownMemberID:
		id := g.c.newMemberID(req.ClientID)
		g.pending[id] = now.Add(time.Duration(req.SessionTimeout) * time.Millisecond)
		res.MemberID = id
		return nil, res, kafkaproto.ErrMemberIDRequired
	case req.MemberID == "":
		res.MemberID = g.c.newMemberID(req.ClientID)
		m = &member{id: res.MemberID}
		g.members[m.id] = m
	case m == nil:
		if _, ok := g.pending[req.MemberID]; !ok {
			return nil, res, fmt.Errorf("%w: %s", kafkaproto.ErrUnknownMemberID, req.MemberID)
		}
		delete(g.pending, req.MemberID)
		m = &member{id: req.MemberID, instanceID: req.InstanceID}
		g.members[m.id] = m
		if req.InstanceID != nil {
			g.instances[*req.InstanceID] = m.id
		}
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	if len(g.members) == 1 || g.protocolType == "" {
		g.protocolType = req.ProtocolType
	}
	m.clientID, m.host, m.http = req.ClientID, req.ClientHost, hm
	m.sessionTimeout = time.Duration(req.SessionTimeout) * time.Millisecond
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeout) * time.Millisecond
	m.protocols = req.Protocols
	m.deadline = now.Add(m.sessionTimeout)
	if m.joinCh != nil { // a retried join replaces the one waiting
		m.joinCh <- joinOutcome{res: kafkaproto.JoinResult{MemberID: m.id}, err: kafkaproto.ErrRebalanceInProgress}
		m.joinCh = nil
	}
	// A follower rejoining a settled generation with unchanged metadata
	// gets that generation back, as Kafka answers it.
	if !changed && m.id != g.leader && (g.state == stateStable || g.state == stateCompletingRebalance) {
		return nil, g.joinResultLocked(m), nil
	}
	var ch chan joinOutcome
	if hm == nil {
		ch = make(chan joinOutcome, 1)
		m.joinCh = ch
	}
	m.awaitingJoin = true
	if g.state != statePreparingRebalance {
		g.prepareRebalanceLocked(now, "member "+m.id+" joined")
	}
	g.maybeCompleteJoinLocked(now)
	return ch, res, nil
}

func protocolNames(ps []kafkaproto.GroupProtocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func sameProtocols(a, b []kafkaproto.GroupProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kafkaproto.GroupProtocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}

// prepareRebalanceLocked starts a rebalance: pending syncs fail with
// REBALANCE_IN_PROGRESS and every member must rejoin before the deadline
// (the largest rebalance timeout; for a group that was empty the short
// initial delay, so that members starting together share a generation).
func (g *group) prepareRebalanceLocked(now time.Time, why string) {
	for _, m := range g.members {
		if m.syncCh != nil {
			m.syncCh <- syncOutcome{err: kafkaproto.ErrRebalanceInProgress}
			m.syncCh = nil
		}
		if m.http != nil {
			m.awaitingJoin = true // the coordinator rejoins HTTP members itself
			m.protocols = m.http.protocols(m)
		}
	}
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	g.delayed = g.state == stateEmpty
	if g.delayed {
		timeout = min(timeout, g.c.initial)
	}
	g.rebalanceDeadline = now.Add(timeout)
	g.c.logger.Debug("preparing rebalance", "group", g.name, "generation", g.generation, "reason", why)
	g.setStateLocked(statePreparingRebalance)
}

// maybeCompleteJoinLocked completes the join phase once every member has
// rejoined (and any initial delay has passed).
func (g *group) maybeCompleteJoinLocked(now time.Time) {
	if g.state != statePreparingRebalance {
		return
	}
	for _, m := range g.members {
		if !m.awaitingJoin {
			return
		}
	}
	if g.delayed && now.Before(g.rebalanceDeadline) {
		return // the initial delay lets more members arrive
	}
	g.completeJoinLocked(now)
}

// completeJoinLocked starts a new generation with the members that
// rejoined; members that did not are removed.
func (g *group) completeJoinLocked(now time.Time) {
	for id, m := range g.members {
		if !m.awaitingJoin {
			g.removeMemberLocked(id)
		}
	}
	g.generation++
	g.delayed = false
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setStateLocked(stateEmpty)
		g.persistLocked(nil)
		return
	}
	g.protocol = g.chooseProtocolLocked()
	if _, ok := g.members[g.leader]; !ok || g.members[g.leader].http != nil {
		g.leader = g.chooseLeaderLocked()
	}
	g.setStateLocked(stateCompletingRebalance)
	for _, m := range g.members {
		m.awaitingJoin = false
		m.deadline = now.Add(m.sessionTimeout)
		if m.joinCh != nil {
			m.joinCh <- joinOutcome{res: g.joinResultLocked(m)}
			m.joinCh = nil
		}
	}
	if g.members[g.leader].http != nil {
		// Only HTTP members: the coordinator is the leader's assignor.
		g.applyAssignmentLocked(g.assignRangeLocked())
	}
}

// chooseProtocolLocked picks the candidate protocol most members prefer.
func (g *group) chooseProtocolLocked() string {
	cands := g.candidatesLocked()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if cands[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, v := range votes {
		if v > bestVotes || (v == bestVotes && name < best) {
			best, bestVotes = name, v
		}
	}
	return best
}

// chooseLeaderLocked prefers a Kafka member (it runs the client's own
// assignor); the smallest id keeps the choice deterministic.
func (g *group) chooseLeaderLocked() string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if g.members[id].http == nil {
			return id
		}
	}
	return ids[0]
}

func (g *group) joinResultLocked(m *member) kafkaproto.JoinResult {
	res := kafkaproto.JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		LeaderID: g.leader, MemberID: m.id}
	if m.id == g.leader {
		for _, id := range g.sortedMemberIDsLocked() {
			o := g.members[id]
			res.Members = append(res.Members, kafkaproto.JoinedMember{MemberID: o.id, InstanceID: o.instanceID,
				Metadata: o.metadataFor(g.protocol)})
		}
	}
	return res
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (g *group) sortedMemberIDsLocked() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// removeMemberLocked forgets a member (its waiters get UNKNOWN_MEMBER_ID).
func (g *group) removeMemberLocked(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	g.failWaitersLocked(m, fmt.Errorf("%w: %s was removed from the group", kafkaproto.ErrUnknownMemberID, id))
	delete(g.members, id)
	if m.instanceID != nil && g.instances[*m.instanceID] == id {
		delete(g.instances, *m.instanceID)
	}
}

// checkMemberLocked applies the member and generation checks shared by
// SyncGroup, Heartbeat and OffsetCommit.
func (g *group) checkMemberLocked(ref kafkaproto.MemberRef) (*member, error) {
	if g.state == stateDead {
		return nil, errGroupNotCoordinator
	}
	if ref.InstanceID != nil {
		if id, ok := g.instances[*ref.InstanceID]; ok && id != ref.MemberID {
			return nil, fmt.Errorf("%w: instance %s is member %s", kafkaproto.ErrFencedInstanceID, *ref.InstanceID, id)
		}
	}
	m, ok := g.members[ref.MemberID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", kafkaproto.ErrUnknownMemberID, ref.MemberID)
	}
	if ref.Generation != g.generation {
		return m, fmt.Errorf("%w: generation %d, group is at %d", kafkaproto.ErrIllegalGeneration, ref.Generation, g.generation)
	}
	return m, nil
}
