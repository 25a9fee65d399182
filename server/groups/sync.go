package groups

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/runnel/runnel/kafkaproto"
)

// The classic protocol after the join phase: SyncGroup, heartbeats,
// leaving, and the timers that expire sessions and rebalances.

// sync is SyncGroup.
func (g *group) sync(ctx context.Context, req kafkaproto.SyncRequest) (kafkaproto.SyncResult, error) {
	g.mu.Lock()
	ch, res, err := g.syncLocked(req)
	g.mu.Unlock()
	if ch == nil {
		return res, err
	}
	select {
	case out := <-ch:
		return out.res, out.err
	case <-ctx.Done():
		return res, ctx.Err()
	}
}

func (g *group) syncLocked(req kafkaproto.SyncRequest) (chan syncOutcome, kafkaproto.SyncResult, error) {
	m, err := g.checkMemberLocked(req.MemberRef)
	if err != nil {
		return nil, kafkaproto.SyncResult{}, err
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return nil, kafkaproto.SyncResult{}, fmt.Errorf("%w: group uses %s/%s", kafkaproto.ErrInconsistentGroupProtocol, g.protocolType, g.protocol)
	}
	m.deadline = g.c.now().Add(m.sessionTimeout)
	switch g.state {
	case statePreparingRebalance:
		return nil, kafkaproto.SyncResult{}, kafkaproto.ErrRebalanceInProgress
	case stateStable:
		return nil, g.syncResultLocked(m), nil
	case stateCompletingRebalance:
	default:
		return nil, kafkaproto.SyncResult{}, fmt.Errorf("%w: group is %s", kafkaproto.ErrUnknownMemberID, g.state)
	}
	ch := make(chan syncOutcome, 1)
	if m.syncCh != nil {
		m.syncCh <- syncOutcome{err: kafkaproto.ErrRebalanceInProgress}
	}
	m.syncCh = ch
	if m.id == g.leader {
		g.applyAssignmentLocked(req.Assignments)
	}
	return ch, kafkaproto.SyncResult{}, nil
}

func (g *group) syncResultLocked(m *member) kafkaproto.SyncResult {
	return kafkaproto.SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

// applyAssignmentLocked stores the leader's assignment and persists the
// group; once the record is written the group is Stable and every waiting
// SyncGroup is answered (assignmentStoredLocked).
func (g *group) applyAssignmentLocked(assignments map[string][]byte) {
	revoked := false
	for id, m := range g.members {
		m.assignment = assignments[id]
		if m.http != nil && m.http.assigned(m, g.generation) {
			revoked = true
		}
	}
	gen := g.generation
	g.persistLocked(func(err error) { g.assignmentStoredLocked(gen, revoked, err) })
}

// assignmentStoredLocked completes a generation's SyncGroup once its
// assignment is written (or failed). A rebalance that started meanwhile
// already failed the waiting syncs.
func (g *group) assignmentStoredLocked(gen int32, revoked bool, err error) {
	if g.generation != gen || g.state != stateCompletingRebalance {
		return
	}
	if err != nil {
		for _, m := range g.members {
			if m.syncCh != nil {
				m.syncCh <- syncOutcome{err: fmt.Errorf("%w: %v", kafkaproto.ErrCoordinatorNotAvailable, err)}
				m.syncCh = nil
			}
		}
		g.prepareRebalanceLocked(g.c.now(), "storing the group failed")
		return
	}
	g.setStateLocked(stateStable)
	for _, m := range g.members {
		if m.syncCh != nil {
			m.syncCh <- syncOutcome{res: g.syncResultLocked(m)}
			m.syncCh = nil
		}
	}
	if revoked && strings.HasPrefix(g.protocol, "cooperative") {
		// A cooperative assignor only hands out what its owner gave up in
		// an earlier generation: rejoin for the HTTP member, as a Kafka
		// member that lost partitions does.
		g.prepareRebalanceLocked(g.c.now(), "an HTTP member gave partitions up")
	}
}

// heartbeat is Heartbeat.
func (g *group) heartbeat(ref kafkaproto.MemberRef) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.checkMemberLocked(ref)
	if err != nil {
		return err
	}
	m.deadline = g.c.now().Add(m.sessionTimeout)
	if g.state == statePreparingRebalance {
		return kafkaproto.ErrRebalanceInProgress
	}
	return nil
}

// leave is LeaveGroup: one error per member.
func (g *group) leave(refs []kafkaproto.MemberRef) []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	errs := make([]error, len(refs))
	left := false
	for i, ref := range refs {
		id := ref.MemberID
		if ref.InstanceID != nil {
			cur, ok := g.instances[*ref.InstanceID]
			switch {
			case !ok:
				errs[i] = fmt.Errorf("%w: instance %s", kafkaproto.ErrUnknownMemberID, *ref.InstanceID)
				continue
			case id != "" && id != cur:
				errs[i] = fmt.Errorf("%w: instance %s is member %s", kafkaproto.ErrFencedInstanceID, *ref.InstanceID, cur)
				continue
			}
			id = cur
		}
		if _, ok := g.members[id]; !ok {
			errs[i] = fmt.Errorf("%w: %q", kafkaproto.ErrUnknownMemberID, id)
			continue
		}
		g.removeMemberLocked(id)
		left = true
	}
	if left {
		g.membersChangedLocked("members left")
	}
	return errs
}

// membersChangedLocked reacts to members removed outside a join.
func (g *group) membersChangedLocked(why string) {
	now := g.c.now()
	switch g.state {
	case stateStable, stateCompletingRebalance:
		if len(g.members) == 0 {
			g.generation++
			g.protocol, g.leader = "", ""
			g.setStateLocked(stateEmpty)
			g.persistLocked(nil)
			return
		}
		g.prepareRebalanceLocked(now, why)
	case statePreparingRebalance:
		g.maybeCompleteJoinLocked(now)
	}
}

// tickLocked runs the group's timers.
func (g *group) tickLocked(now time.Time) {
	for id, exp := range g.pending {
		if now.After(exp) {
			delete(g.pending, id)
		}
	}
	expired := false
	for id, m := range g.members {
		keep := (m.joinCh != nil || m.syncCh != nil) && m.http == nil
		if !keep && now.After(m.deadline) {
			g.c.logger.Info("group member session expired", "group", g.name, "member", id)
			g.removeMemberLocked(id)
			expired = true
		}
	}
	if expired {
		g.membersChangedLocked("session timeout")
	}
	if g.state == statePreparingRebalance && !now.Before(g.rebalanceDeadline) {
		g.completeJoinLocked(now)
		return
	}
	g.maybeCompleteJoinLocked(now)
	g.retryPersistLocked()
}
