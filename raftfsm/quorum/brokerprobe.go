package quorum

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum/leaderwatch"
)

// The active controller's broker probe: a broker whose heartbeats are late
// is probed at its node's inter-node address (Broker.RaftAddr, the port
// mux; for a combined node, the node's one inter-node port). A refusal or a
// reset means its process is gone (leaderwatch.Gone: a dead process's
// kernel refuses new connections, a paused or slow one still accepts), and
// the broker is fenced at once instead of a session timeout after its last
// heartbeat (issue 19: kill -9 at 30,000 partitions was fenced 10-11 s
// later, and acks=all writes to the survivors' partitions waited for it).
// Anything else (accepted, a timeout) is left to the session timeout.
//
// Every broker is also probed at once, late or not, when a raft connection
// the active controller dialled ends (each broker follows the metadata
// log: the leader's heartbeats to a dead node's process fail within a
// tenth of the raft timeout) and when a controller takes over: a kill -9
// is fenced in a fraction of a second, not one to three heartbeat
// intervals later. A broker that fenced so has its leaderships moved at
// once (the fenced wake-up), not at the controller loop's next tick.
//
// Probes run in their own goroutines (spawn: Close waits for them), never
// in the controller loop's tick, each bounded by brokerProbeWait; at most
// one runs per broker, and a late broker is probed at most once per
// heartbeat interval (a connection's end or a takeover probes it anyway).

// brokerProbeWait bounds one probe (the dial, then the wait for a reset),
// as the leader watch's ProbeWait does.
const brokerProbeWait = 200 * time.Millisecond

// probeAfter is how late a heartbeat must be for its broker to be probed:
// one and a half intervals. A live broker heartbeats one interval after its
// last heartbeat was answered, so its heartbeats arrive an interval plus a
// round trip (with the controller's VerifyLeader round) apart: half an
// interval covers that on a loaded machine, and a live broker probed anyway
// accepts and is left alone. With the loop's tick (half an interval), a
// dead broker is fenced about two intervals after its last heartbeat.
func probeAfter(interval time.Duration) time.Duration { return interval * 3 / 2 }

// brokerProbes tracks the probes in flight and when each broker was last
// probed. Safe for concurrent use.
type brokerProbes struct {
	mu      sync.Mutex
	running map[int32]bool
	last    map[int32]time.Time
}

// start claims a probe of broker id: false when one runs or the last one
// started less than every ago.
func (p *brokerProbes) start(id int32, now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running, p.last = map[int32]bool{}, map[int32]time.Time{}
	}
	if p.running[id] || now.Sub(p.last[id]) < every {
		return false
	}
	p.running[id], p.last[id] = true, now
	return true
}

func (p *brokerProbes) done(id int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, id)
}

// late lists the heartbeating brokers of img, not fenced, whose last
// heartbeat of term (or the takeover) is older than after, with when it
// was. Brokers without a session are left to expired, which starts one.
func (s *sessions) late(term uint64, img *raftfsm.Image, now time.Time, after time.Duration) map[*raftfsm.Broker]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	out := map[*raftfsm.Broker]time.Time{}
	for id, b := range img.Brokers {
		ss, ok := s.m[id]
		if !b.Heartbeats || b.State == raftfsm.BrokerFenced || !ok || ss.epoch != b.Epoch {
			continue
		}
		if now.Sub(ss.last) > after {
			out[b] = ss.last
		}
	}
	return out
}

// heardSince: a heartbeat of broker id at epoch came in term after last.
func (s *sessions) heardSince(term uint64, id int32, epoch int64, last time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forTermLocked(term)
	ss, ok := s.m[id]
	return !ok || ss.epoch != epoch || ss.last.After(last)
}

// probeLate starts a probe of every broker whose heartbeat is late, or of
// every broker when all (a raft connection ended, or a new term). Called
// from the controller loop while this node leads in term.
func (n *Node) probeLate(ctx context.Context, term uint64, img *raftfsm.Image, all bool) {
	now, interval := time.Now(), n.heartbeatInterval()
	// A late broker is probed once an interval; after a connection ended
	// or at a takeover, every broker whose probe is not running is: a
	// probe that found it alive a moment ago says nothing of it now.
	after, every := probeAfter(interval), interval
	if all {
		after, every = 0, 0
	}
	for b, last := range n.q.sessions.late(term, img, now, after) {
		if b.ID == n.cfg.NodeID || b.RaftAddr == "" || !n.q.probes.start(b.ID, now, every) {
			continue // this process is alive; an address-less broker cannot be probed
		}
		late := now.Sub(last) > probeAfter(interval)
		if !n.spawn(func() {
			defer n.q.probes.done(b.ID)
			n.probeBroker(ctx, term, b, last, late)
		}) {
			n.q.probes.done(b.ID)
			return
		}
	}
}

// wake is a non-blocking send on a wake-up channel of capacity 1.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// probeBroker fences broker b (at its epoch) when its node's port says its
// process is gone and no heartbeat came in since last.
func (n *Node) probeBroker(ctx context.Context, term uint64, b *raftfsm.Broker, last time.Time, late bool) {
	if !leaderwatch.Gone(ctx, leaderwatch.TCP, b.RaftAddr, brokerProbeWait) {
		if late && ctx.Err() == nil {
			n.log.Info("raftfsm: broker's heartbeats are late but its port does not refuse; left to its session timeout",
				"broker", b.ID, "epoch", b.Epoch, "last_heartbeat", last)
		}
		return
	}
	if n.q.sessions.heardSince(term, b.ID, b.Epoch, last) {
		return // a heartbeat came meanwhile: not this broker's process that is gone
	}
	// The epoch makes the fence miss a broker that restarted and registered
	// again meanwhile (ErrStaleEpoch): its new epoch stays alive.
	actx, cancel := context.WithTimeout(ctx, defaultApplyTimeout)
	defer cancel()
	_, err := n.applyLocal(actx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: b.ID, Epoch: b.Epoch, State: raftfsm.BrokerFenced}})
	switch {
	case errors.Is(err, raftfsm.ErrStaleEpoch):
		n.log.Info("raftfsm: broker's process is gone but it registered again; its new epoch stays", "broker", b.ID, "epoch", b.Epoch)
	case err != nil:
		n.log.Warn("raftfsm: cannot fence broker whose process is gone; its session timeout will", "broker", b.ID, "err", err)
	default:
		n.log.Info("raftfsm: broker fenced, its process is gone (its port refuses connections)",
			"broker", b.ID, "epoch", b.Epoch, "addr", b.RaftAddr, "last_heartbeat", last)
		wake(n.q.fenced)
	}
}
