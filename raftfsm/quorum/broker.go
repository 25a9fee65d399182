package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// The broker's side of its lifecycle: registration, heartbeats, controlled
// shutdown. The heartbeat goroutine is owned by the Node: started by
// RegisterBroker, stopped by ControlledShutdown or Close.

// RegisterBroker registers this node's broker with the active controller
// (forwarded like Apply). RaftAddr defaults to this node's advertised
// address, IncarnationID to one id per Open; Heartbeats is set. The broker
// starts fenced with a new Epoch; RegisterBroker then heartbeats every
// Config.HeartbeatInterval (re-registering when an answer says the epoch is
// stale) and returns once the controller has unfenced it, with the broker
// as the metadata then shows it. On ctx's end it returns the error and keeps
// heartbeating.
func (n *Node) RegisterBroker(ctx context.Context, rb raftfsm.RegisterBroker) (*raftfsm.Broker, error) {
	b, err := n.register(ctx, rb)
	if err != nil {
		return nil, err
	}
	n.startHeartbeats()
	return n.waitUnfenced(ctx, b)
}

// maxRegisterRetries is how many times register tries again after an
// election got in the way (each try waits for a leader up to maxLeaderWait).
const maxRegisterRetries = 3

// register applies a RegisterBroker for this node and remembers it.
func (n *Node) register(ctx context.Context, rb raftfsm.RegisterBroker) (*raftfsm.Broker, error) {
	if rb.RaftAddr == "" {
		rb.RaftAddr = string(n.trans.LocalAddr())
	}
	if rb.IncarnationID == "" {
		rb.IncarnationID = n.q.incarnation
	}
	rb.Heartbeats = true
	var res any
	var err error
	for attempt := 0; ; attempt++ {
		res, err = n.Apply(ctx, raftfsm.Command{RegisterBroker: &rb})
		// An election at the moment of a start (leadership lost while
		// committing, the leader's connection lost) is waited out, a
		// few times: registering again is harmless, a later
		// registration replaces one that may have applied. It used to
		// stop the node's start (seen under load in CI).
		if err == nil || !errors.Is(err, raftfsm.ErrNotLeader) || attempt == maxRegisterRetries || ctx.Err() != nil {
			break
		}
		n.log.Info("raftfsm: registering the broker again after an election", "broker", rb.ID, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("raftfsm: register broker %d: %w (%v)", rb.ID, err, ctx.Err())
		case <-n.done:
			return nil, raftfsm.ErrClosed
		case <-time.After(retryPause):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("raftfsm: register broker %d: %w", rb.ID, err)
	}
	b, ok := res.(*raftfsm.Broker)
	if !ok {
		return nil, fmt.Errorf("%w: register broker answered %T", ErrRPC, res)
	}
	n.q.hbMu.Lock()
	n.q.registered = b
	n.q.regCmd = rb
	n.q.hbMu.Unlock()
	n.log.Info("raftfsm: broker registered", "broker", b.ID, "epoch", b.Epoch)
	return b, nil
}

// waitUnfenced waits until this node's image shows b's epoch no longer
// fenced and a heartbeat answer gave the broker its lease. The image that
// unfences the broker is published before the answer of the heartbeat that
// unfenced it sets the lease, so it also wakes at the lease: it used to
// wait for the next image or heartbeat then (2 s by default, in about half
// the restarts of a node; issue 19).
func (n *Node) waitUnfenced(ctx context.Context, b *raftfsm.Broker) (*raftfsm.Broker, error) {
	for {
		leased := n.leaseWait() // before the checks: a lease set after them closes it
		img, changed := n.Image()
		cur, ok := img.Brokers[b.ID]
		if ok && cur.Epoch != b.Epoch {
			// Re-registered meanwhile: wait for the newest registration.
			n.q.hbMu.Lock()
			b = n.q.registered
			n.q.hbMu.Unlock()
		} else if ok && cur.State != raftfsm.BrokerFenced && n.BrokerLeaseValid(time.Now()) {
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("raftfsm: broker %d not unfenced: %w", b.ID, ctx.Err())
		case <-n.done:
			return nil, raftfsm.ErrClosed
		case <-changed:
		case <-leased:
		case <-time.After(n.heartbeatInterval()):
		}
	}
}

// setLeaseLocked sets the broker's lease and wakes waitUnfenced. Called
// with hbMu held.
func (n *Node) setLeaseLocked(until time.Time) {
	n.q.leaseUntil = until
	if n.q.leaseSet != nil {
		close(n.q.leaseSet)
		n.q.leaseSet = nil
	}
}

// leaseWait returns a channel closed when a heartbeat answer next sets the
// broker's lease.
func (n *Node) leaseWait() <-chan struct{} {
	n.q.hbMu.Lock()
	defer n.q.hbMu.Unlock()
	if n.q.leaseSet == nil {
		n.q.leaseSet = make(chan struct{})
	}
	return n.q.leaseSet
}

// startHeartbeats starts the heartbeat goroutine unless it runs.
func (n *Node) startHeartbeats() {
	n.q.hbMu.Lock()
	defer n.q.hbMu.Unlock()
	if n.q.hbCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(n.q.ctx)
	done := make(chan struct{})
	if !n.spawn(func() {
		defer close(done)
		n.heartbeatLoop(ctx)
	}) {
		cancel()
		return
	}
	n.q.hbCancel, n.q.hbDone = cancel, done
}

// stopHeartbeats stops the heartbeat goroutine and waits for it.
func (n *Node) stopHeartbeats() {
	n.q.hbMu.Lock()
	cancel, done := n.q.hbCancel, n.q.hbDone
	n.q.hbCancel, n.q.hbDone = nil, nil
	n.q.hbMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (n *Node) heartbeatLoop(ctx context.Context) {
	interval := n.heartbeatInterval()
	for {
		n.sendHeartbeat(ctx, interval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// sendHeartbeat sends one heartbeat to the leader (one attempt within about
// two intervals) and re-registers on a stale epoch.
func (n *Node) sendHeartbeat(ctx context.Context, interval time.Duration) {
	n.q.hbMu.Lock()
	b, rb := n.q.registered, n.q.regCmd
	n.q.hbMu.Unlock()
	if b == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, max(2*interval, time.Second))
	defer cancel()
	sent := time.Now()
	hb := heartbeat{ID: b.ID, Epoch: b.Epoch, Applied: n.fsm.AppliedIndex()}
	if n.cfg.BrokerHealth != nil {
		hb.StorageError = truncateHealth(n.cfg.BrokerHealth())
	}
	var reply heartbeatReply
	res, err := n.onLeaderOnce(hctx, "heartbeat", hb, &reply, func(ctx context.Context) (any, error) {
		return n.onHeartbeat(ctx, hb)
	})
	if r, ok := res.(heartbeatReply); ok {
		reply = r
	}
	if err != nil {
		n.log.Debug("raftfsm: heartbeat", "broker", b.ID, "err", err)
		return
	}
	n.q.hbMu.Lock()
	if !reply.Stale && reply.State != raftfsm.BrokerFenced && n.q.registered == b {
		n.setLeaseLocked(sent.Add(n.sessionTimeout()))
	} else {
		n.q.leaseUntil = time.Time{}
	}
	n.q.hbMu.Unlock()
	if !reply.Stale {
		return
	}
	n.log.Info("raftfsm: broker epoch stale, registering again", "broker", b.ID, "epoch", b.Epoch)
	if _, err := n.register(hctx, rb); err != nil && !errors.Is(err, context.Canceled) {
		n.log.Warn("raftfsm: re-register broker", "broker", b.ID, "err", err)
	}
}

// onLeaderOnce is onLeader with a single attempt.
func (n *Node) onLeaderOnce(ctx context.Context, method string, req, resp any, local func(context.Context) (any, error)) (any, error) {
	if n.isLeader() {
		return local(ctx)
	}
	addr, ok := n.leaderAddr()
	if !ok {
		return nil, raftfsm.ErrNotLeader
	}
	return nil, n.callAddr(ctx, addr, method, 0, req, resp)
}

// ControlledShutdown asks the active controller to mark this node's broker
// shutting down and move its partition leaderships away, waits until this
// node has applied that, then stops heartbeating (the controller fences the
// broker once its session lapses). Nothing to do when it never registered.
func (n *Node) ControlledShutdown(ctx context.Context) error {
	n.q.hbMu.Lock()
	b := n.q.registered
	n.q.hbMu.Unlock()
	if b == nil {
		return nil
	}
	req := shutdownRequest{ID: b.ID, Epoch: b.Epoch}
	for {
		var reply shutdownReply
		res, err := n.onLeader(ctx, "shutdown", req, &reply, func(ctx context.Context) (any, error) {
			return n.onControlledShutdown(ctx, req)
		})
		if r, ok := res.(shutdownReply); ok {
			reply = r
		}
		if err == nil {
			err = n.waitApplied(ctx, reply.Index)
		}
		// A timeout or an election in progress (leadership lost while
		// committing, no leader yet) is retried until ctx ends: a broker
		// stopping while the controllers change hands still hands its
		// partitions over.
		retriable := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, raftfsm.ErrNotLeader)
		if err != nil && (ctx.Err() != nil || !retriable) {
			return fmt.Errorf("raftfsm: controlled shutdown of broker %d: %w", b.ID, err)
		}
		if err == nil && reply.Remaining == 0 {
			break
		}
		n.log.Info("raftfsm: controlled shutdown continues", "broker", b.ID, "remaining", reply.Remaining, "err", err)
		if errors.Is(err, raftfsm.ErrNotLeader) {
			select { // give the election time
			case <-ctx.Done():
			case <-n.done:
				return raftfsm.ErrClosed
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	n.stopHeartbeats()
	return nil
}

// waitApplied waits until this node has applied index.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		img, changed := n.Image()
		if img.Index >= index || n.fsm.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return raftfsm.ErrClosed
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// BrokerLiveness reports, from the active controller (forwarded), each
// broker's last heartbeat and applied metadata index in its current term.
func (n *Node) BrokerLiveness(ctx context.Context) (map[int32]raftfsm.Liveness, error) {
	var out map[int32]raftfsm.Liveness
	res, err := n.onLeader(ctx, "liveness", struct{}{}, &out, func(context.Context) (any, error) {
		return n.q.sessions.liveness(n.raft.CurrentTerm()), nil
	})
	if err != nil {
		return nil, err
	}
	if m, ok := res.(map[int32]raftfsm.Liveness); ok {
		return m, nil
	}
	return out, nil
}

// BrokerLeaseValid reports whether this node's broker may act as a
// partition leader at now: the active controller answered a heartbeat sent
// less than a session timeout ago, and not as fenced. A broker cut off from
// the controllers stops leading before they fence it and elect other
// leaders, so it does not take writes that the new leaders never see; a
// fenced broker leads again once it is unfenced (caught up with the
// metadata). False before the first answered heartbeat.
func (n *Node) BrokerLeaseValid(now time.Time) bool {
	n.q.hbMu.Lock()
	defer n.q.hbMu.Unlock()
	return now.Before(n.q.leaseUntil)
}

// RegisteredBroker is this node's broker as last registered by
// RegisterBroker (or by a re-registration after a stale epoch); nil before.
// Immutable.
func (n *Node) RegisteredBroker() *raftfsm.Broker {
	n.q.hbMu.Lock()
	defer n.q.hbMu.Unlock()
	return n.q.registered
}
