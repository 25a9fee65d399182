package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum/leadermoves"
)

// The active controller's side of the broker lifecycle: heartbeat sessions
// in memory, fencing when they lapse, unfencing when a fenced broker is
// back and caught up, and moving partition leadership away from brokers
// that are not alive.

// sessions holds the last heartbeat of each broker, for one leader term: a
// new term starts every broker with a fresh session. Safe for concurrent use.
type sessions struct {
	mu   sync.Mutex
	term uint64
	m    map[int32]*session
}

type session struct {
	epoch   int64
	last    time.Time // last heartbeat; at takeover, the takeover time
	applied uint64
	beat    bool   // a heartbeat came in this term
	health  string // heartbeat.StorageError
	// catchUp: the metadata index a fenced broker must have applied
	// before it is unfenced, fixed at its first heartbeat while fenced (0
	// while it is not fenced).
	catchUp uint64
}

// forTermLocked resets the table when term is not the one it holds.
func (s *sessions) forTermLocked(term uint64) {
	if s.m == nil || s.term != term {
		s.term, s.m = term, map[int32]*session{}
	}
}

// touch records a heartbeat. For a fenced broker (fencedAt: the leader's
// metadata index now; 0 for a broker that is not fenced) it returns the
// index the broker must have applied before it is unfenced: the index at
// its first heartbeat since it was fenced, so past the fencing and the
// leader elections that followed it, and fixed, so a broker that keeps up
// with a busy log still gets there.
func (s *sessions) touch(term uint64, id int32, epoch int64, applied uint64, health string, now time.Time, fencedAt uint64) (catchUp uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	ss := &session{epoch: epoch, last: now, applied: applied, beat: true, health: health}
	if fencedAt > 0 {
		ss.catchUp = fencedAt
		if old := s.m[id]; old != nil && old.epoch == epoch && old.catchUp != 0 {
			ss.catchUp = old.catchUp
		}
	}
	s.m[id] = ss
	return ss.catchUp
}

// unfenced forgets the catch-up target of a broker just unfenced: the next
// fencing sets a new one.
func (s *sessions) unfenced(term uint64, id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	if ss := s.m[id]; ss != nil {
		ss.catchUp = 0
	}
}

// expired lists the heartbeating brokers of img, not yet fenced, whose
// session lapsed; brokers without a session get one starting now.
func (s *sessions) expired(term uint64, img *raftfsm.Image, now time.Time, timeout time.Duration) []*raftfsm.Broker {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	var out []*raftfsm.Broker
	for id, b := range img.Brokers {
		if !b.Heartbeats {
			continue
		}
		ss, ok := s.m[id]
		if !ok || ss.epoch != b.Epoch {
			ss = &session{epoch: b.Epoch, last: now}
			s.m[id] = ss
		}
		if b.State != raftfsm.BrokerFenced && now.Sub(ss.last) > timeout {
			out = append(out, b)
		}
	}
	return out
}

// unhealthy lists the brokers whose last heartbeat of term reported a
// storage error (logs refusing writes).
func (s *sessions) unhealthy(term uint64) map[int32]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	out := map[int32]bool{}
	for id, ss := range s.m {
		if ss.health != "" {
			out[id] = true
		}
	}
	return out
}

// liveness is the table of term as BrokerLiveness reports it.
func (s *sessions) liveness(term uint64) map[int32]raftfsm.Liveness {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	out := make(map[int32]raftfsm.Liveness, len(s.m))
	for id, ss := range s.m {
		l := raftfsm.Liveness{AppliedIndex: ss.applied, StorageError: ss.health}
		if ss.beat {
			l.LastHeartbeat = ss.last
		}
		out[id] = l
	}
	return out
}

// heartbeat is a broker's heartbeat request.
type heartbeat struct {
	ID      int32
	Epoch   int64
	Applied uint64 // the broker's applied metadata index
	// StorageError is Config.BrokerHealth, at most maxHealthLen bytes.
	StorageError string `json:",omitempty"`
}

// maxHealthLen bounds the health text a heartbeat carries and the active
// controller keeps per broker.
const maxHealthLen = 512

func truncateHealth(s string) string {
	if len(s) > maxHealthLen {
		return s[:maxHealthLen]
	}
	return s
}

// heartbeatReply: Stale means the epoch is not the broker's current one
// (or it is unknown): it must register again.
type heartbeatReply struct {
	State raftfsm.BrokerState
	Stale bool
}

// onHeartbeat records a heartbeat on the leader and unfences the broker when
// it has applied the metadata up to its registration and up to where the
// leader was at its first heartbeat while fenced.
func (n *Node) onHeartbeat(ctx context.Context, hb heartbeat) (heartbeatReply, error) {
	img, _ := n.Image()
	b, ok := img.Brokers[hb.ID]
	if !ok || b.Epoch != hb.Epoch {
		return heartbeatReply{Stale: true}, nil
	}
	var fencedAt uint64
	if b.State == raftfsm.BrokerFenced {
		fencedAt = max(img.Index, 1)
	}
	catchUp := n.q.sessions.touch(n.raft.CurrentTerm(), hb.ID, hb.Epoch, hb.Applied, truncateHealth(hb.StorageError), time.Now(), fencedAt)
	// Unfenced only once caught up with the metadata (as KRaft requires):
	// a broker back from a partition would otherwise lead with a stale
	// image, taking writes for partitions that have other leaders now.
	if b.State != raftfsm.BrokerFenced || hb.Applied < max(uint64(b.Epoch), catchUp) {
		if b.State != raftfsm.BrokerFenced {
			// This answer renews the broker's lease: only a controller a
			// quorum still follows may give it (verifyLeader).
			if err := n.verifyLeader(ctx); err != nil {
				return heartbeatReply{}, err
			}
		}
		return heartbeatReply{State: b.State}, nil
	}
	res, err := n.applyLocal(ctx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: b.ID, Epoch: b.Epoch, State: raftfsm.BrokerAlive}})
	if err != nil {
		if errors.Is(err, raftfsm.ErrStaleEpoch) {
			return heartbeatReply{Stale: true}, nil
		}
		return heartbeatReply{}, err
	}
	n.q.sessions.unfenced(n.raft.CurrentTerm(), b.ID)
	n.log.Info("raftfsm: broker unfenced", "broker", b.ID, "epoch", b.Epoch, "applied", hb.Applied)
	return heartbeatReply{State: res.(*raftfsm.Broker).State}, nil
}

// verifyLeader confirms that this node still leads: a quorum answered a
// round of raft heartbeats sent after the call (hashicorp/raft's
// VerifyLeader). A leader that was paused or cut off keeps believing it
// leads until it hears of a newer term or its raft lease runs out; answered
// from that belief, a heartbeat renewed its broker's lease (BrokerLeaseValid)
// while the other controllers had elected a successor, fenced the broker
// and moved its leaderships, and the broker kept acknowledging acks=1
// writes that were truncated later (issue 20). Once verified, any new
// controller is elected after this answer, and it fences the broker only a
// session timeout into its term: after the lease the broker computes from
// when it sent the heartbeat. ErrNotLeader when leadership is lost; it
// returns when ctx ends (a cut-off leader steps down within its raft
// lease, which fails the verification).
func (n *Node) verifyLeader(ctx context.Context) error {
	f := n.raft.VerifyLeader()
	waited := make(chan error, 1)
	if !n.spawn(func() { waited <- n.await(f) }) {
		return raftfsm.ErrClosed
	}
	select {
	case err := <-waited:
		if err != nil {
			if errors.Is(err, raftfsm.ErrClosed) || errors.Is(err, raft.ErrRaftShutdown) {
				return raftfsm.ErrClosed
			}
			return fmt.Errorf("%w: leadership not confirmed by a quorum (%v)", raftfsm.ErrNotLeader, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("raftfsm: verify leadership: %w", ctx.Err())
	}
}

// reconcileEvery bounds how long the controller loop goes without looking
// for partitions to move when no broker changed state (partitions can also
// go offline through ChangePartition).
const reconcileEvery = 10

// controllerLoop runs on every node; while it leads, it fences brokers whose
// sessions lapsed, probes those whose heartbeats are late (every broker
// when a raft connection ended or the term is new: brokerprobe.go) and,
// when a broker changed state (and every reconcileEvery ticks or
// wake-ups), moves partition leaders (reconcile). It runs at each tick
// and at each wake-up (quorum.peerLost, quorum.fenced).
func (n *Node) controllerLoop(ctx context.Context) {
	tick := time.NewTicker(min(max(n.heartbeatInterval()/2, 20*time.Millisecond), time.Second))
	defer tick.Stop()
	var seen string // broker states at the last reconcile; "" after a term change
	var term uint64
	idle := 0
	for {
		probeAll := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-n.q.peerLost:
			probeAll = true
		case <-n.q.fenced:
		}
		if n.raft.State() != raft.Leader {
			seen = ""
			continue
		}
		if t := n.raft.CurrentTerm(); t != term {
			// A new controller probes every broker at once: the
			// sessions start at the takeover, and a dead broker would
			// wait for its heartbeats to be late.
			term, seen, probeAll = t, "", true
		}
		img, _ := n.Image()
		n.fenceExpired(ctx, term, img)
		img, _ = n.Image()
		n.probeLate(ctx, term, img, probeAll)
		idle++
		sick := n.q.sessions.unhealthy(term)
		states := leadermoves.States(img, sick)
		switch {
		case states == seen && idle < reconcileEvery:
		case idle < reconcileEvery && n.reconciledWith(term, states):
			// A controlled shutdown's reconcile ran with these states
			// already: scanning every partition again finds nothing.
			seen = states
		case !n.tryReconcile(ctx):
			// A controlled shutdown's moves are being applied (seconds at
			// millions of partitions): fencing and probing go on meanwhile.
		default:
			seen, idle = states, 0
		}
	}
}

// reconciledWith: the last reconcile ran in term with these broker states.
// False while a reconcile runs.
func (n *Node) reconciledWith(term uint64, states string) bool {
	if !n.q.reconcileMu.TryLock() {
		return false
	}
	defer n.q.reconcileMu.Unlock()
	return n.q.reconciled == reconciledKey(term, states)
}

func reconciledKey(term uint64, states string) string { return fmt.Sprintf("%d|%s", term, states) }

// fenceExpired fences the brokers whose sessions lapsed.
func (n *Node) fenceExpired(ctx context.Context, term uint64, img *raftfsm.Image) {
	for _, b := range n.q.sessions.expired(term, img, time.Now(), n.sessionTimeout()) {
		actx, cancel := context.WithTimeout(ctx, defaultApplyTimeout)
		_, err := n.applyLocal(actx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: b.ID, Epoch: b.Epoch, State: raftfsm.BrokerFenced}})
		cancel()
		if err != nil {
			n.log.Warn("raftfsm: cannot fence broker", "broker", b.ID, "err", err)
			continue
		}
		n.log.Info("raftfsm: broker fenced, heartbeats lapsed", "broker", b.ID, "epoch", b.Epoch)
	}
}

// reconcile moves the leadership of every partition whose leader is not
// alive to an alive ISR member, and gives offline partitions a leader again
// when an ISR member is alive. On the leader only; returns once the changes
// are applied (or failed, when they are logged and retried by the loop).
func (n *Node) reconcile(ctx context.Context) {
	n.q.reconcileMu.Lock()
	defer n.q.reconcileMu.Unlock()
	n.reconcileLocked(ctx)
}

// tryReconcile is reconcile unless one runs (false then).
func (n *Node) tryReconcile(ctx context.Context) bool {
	if !n.q.reconcileMu.TryLock() {
		return false
	}
	defer n.q.reconcileMu.Unlock()
	n.reconcileLocked(ctx)
	return true
}

// reconcileLocked is reconcile with reconcileMu held.
func (n *Node) reconcileLocked(ctx context.Context) {
	n.moveLeaders(ctx, n.planMoves)
}

// planMoves is the leader moves the image calls for (leadermoves.Plan),
// batched across topics once the cluster applies command version 2.
func (n *Node) planMoves(img *raftfsm.Image, sick map[int32]bool) []raftfsm.Command {
	cmds := leadermoves.Plan(img, sick)
	if len(cmds) > 0 && img.CommandVersion >= 2 {
		cmds = leadermoves.Batch(img, cmds)
	}
	return cmds
}

// maxMoveRounds bounds the plans of one reconcile: the first, and those
// made again because changes of the one before went stale.
const maxMoveRounds = 4

// moveLeaders proposes plan's moves from the current image and waits until
// they are applied. A change whose partition changed between the plan and
// its commit is skipped by the FSM (stale epochs: an ISR change a broker
// proposed meanwhile, or an entry of an earlier term this controller had
// not applied yet when it planned); such moves are planned again at once
// from the newer image, not at the controller loop's next look for moves
// (reconcileEvery ticks later, seconds during which the partition stays
// led by a fenced broker). With reconcileMu held.
func (n *Node) moveLeaders(ctx context.Context, plan func(*raftfsm.Image, map[int32]bool) []raftfsm.Command) {
	for round := 1; round <= maxMoveRounds && ctx.Err() == nil; round++ {
		img, _ := n.Image()
		term := n.raft.CurrentTerm()
		sick := n.q.sessions.unhealthy(term)
		n.q.reconciled = reconciledKey(term, leadermoves.States(img, sick))
		cmds := plan(img, sick)
		if len(cmds) == 0 {
			return
		}
		res, errs := n.applyAll(ctx, cmds, moveWindow)
		moved, want, failed := 0, 0, 0
		for i, err := range errs {
			topics := leadermoves.Topics(cmds[i])
			for _, t := range topics {
				want += len(t.Changes)
			}
			if err != nil {
				// Once leadership is lost every later command fails the
				// same way: the first failure and the count say it.
				if failed == 0 {
					n.log.Warn("raftfsm: cannot move partition leaders", "topic", topics[0].Topic, "topics", len(topics), "err", err)
				}
				failed++
				continue
			}
			moved += int(res[i].(int64))
		}
		n.log.Info("raftfsm: partition leaders moved", "count", moved, "of", want, "commands", len(cmds), "failed_commands", failed, "round", round)
		if failed > 0 || moved == want {
			return // a failure is the controller loop's to retry
		}
	}
}

// shutdownRequest asks the leader to move a broker's leaderships away.
type shutdownRequest struct {
	ID    int32
	Epoch int64
}

// shutdownReply: the metadata index by which the moves are applied, and
// how many partitions the broker still leads that could move (the moves
// did not all finish in time: the broker asks again).
type shutdownReply struct {
	Index     uint64
	Remaining int
}

// onControlledShutdown marks the broker shutting down and moves its
// partition leaderships to other alive ISR members.
func (n *Node) onControlledShutdown(ctx context.Context, req shutdownRequest) (shutdownReply, error) {
	img, _ := n.Image()
	b, ok := img.Brokers[req.ID]
	if !ok {
		return shutdownReply{}, raftfsm.ErrUnknownBroker
	}
	if b.Epoch != req.Epoch {
		return shutdownReply{}, raftfsm.ErrStaleEpoch
	}
	if b.State != raftfsm.BrokerShuttingDown {
		cmd := raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: b.ID, Epoch: b.Epoch, State: raftfsm.BrokerShuttingDown}}
		if _, err := n.applyLocal(ctx, cmd); err != nil {
			return shutdownReply{}, err
		}
	}
	n.reconcile(ctx)
	img, _ = n.Image()
	return shutdownReply{Index: img.Index, Remaining: leadermoves.Movable(img, req.ID)}, nil
}
