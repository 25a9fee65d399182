// Package leaderwatch tells a raft follower, within a fraction of raft's
// heartbeat timeout (Quiet), that its leader's process has died, so that
// it can stand for election then instead of waiting out the timeout (one to three timeouts
// with hashicorp/raft: the follower checks at random intervals, and the
// other survivors grant no vote while they still have the leader).
//
// # What counts as dead
//
// When a process ends (a crash, kill -9, the OOM killer), its kernel closes
// its sockets: the connections it had open end at once, and a new
// connection to its port is refused (or reset, when it reached the
// listener's queue just before the listener closed). Only a dead process
// gives that; a slow or paused one (SIGSTOP, a long GC, a loaded machine)
// keeps its connections and accepts, and a machine cut off by the network
// times out. So a follower is told (Kick) when a connection from a peer
// ends, probes its leader's address, and acts only on a refusal or a reset:
// everything else is left to raft's timeouts, which a lost connection that
// was merely redialled never reaches. A refusal is then confirmed by
// silence: the follower stands only once it has heard nothing from the
// leader for Quiet (longer than the leader's longest heartbeat interval),
// so a live leader that this node's address for it does not reach (a
// stale address, a firewall rejecting one direction) keeps leading.
//
// # Who stands
//
// Two survivors standing at once split the vote (each votes for itself)
// and cost a random election timeout; and a survivor whose log lacks the
// last entry the leader sent the others loses (voters refuse a candidate
// less up to date than themselves). So one survivor stands: the one with
// the longest log, the lowest id among equals. Each asks the other voters
// for the last index of their logs (LastIndex); since nothing is appended
// without a leader, all see the same lengths. A voter that does not
// answer within AskWait is left out (a dead one is refused at once). A
// survivor that finds another answering voter ahead of it leaves the
// election to it, and to raft's timeout should that one not stand: a
// second candidate standing later on its own reckoning (a stagger) was
// seen to split the vote when the first one's vote requests came late on
// a loaded machine.
//
// # Goroutines
//
// Run is the one goroutine (the caller's, stopped by its context). Kick
// never blocks; kicks that arrive while a probe runs are coalesced into
// one. Stand is called from Run only.
package leaderwatch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
)

// View is what the watch needs to know of the raft node, read at once.
type View struct {
	Self     string   // this node's raft server id
	Leader   string   // the leader's server id; "" when none is known
	Term     uint64   // the current raft term
	Follower bool     // this node is a follower (not leader, candidate, shut down)
	Voters   []string // the voters of the latest configuration
	// LastContact is when this node last heard from its leader.
	LastContact time.Time
	// LastIndex is the index of the last entry in this node's log.
	LastIndex uint64
}

// Config wires a Watch to its raft node. View, Addr and Stand must be safe
// to call from Run's goroutine while the node runs.
type Config struct {
	// View reads the node's raft state.
	View func() View
	// Addr is where this node dials the given server (its raft port).
	Addr func(id string) (string, error)
	// LastIndex asks voter id for the last index of its log.
	LastIndex func(ctx context.Context, id string) (uint64, error)
	// Stand makes this node a candidate now, its vote requests marked as
	// a leadership transfer so that voters that still know the dead leader
	// grant them (with hashicorp/raft: a TimeoutNow RPC to itself).
	Stand func(ctx context.Context) error
	// AskWait bounds each LastIndex question. Default 500ms.
	AskWait time.Duration
	// Quiet is how long the leader must have been silent for a refusal
	// to count: longer than its longest interval between heartbeats.
	Quiet time.Duration
	// ProbeWait bounds a probe: the dial, and then the wait for a reset of
	// a connection the dying process's listener had queued. Default 200ms.
	ProbeWait time.Duration
	// Dial dials the leader's address; nil: TCP (net.Dialer). Tests
	// replace it.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	Log  *slog.Logger
}

// Watch is one node's leader watch. Safe for concurrent use.
type Watch struct {
	cfg    Config
	kick   chan string // capacity 1: pending kicks coalesce
	stands atomic.Uint64
}

// New returns a watch; start it with Run.
func New(cfg Config) *Watch {
	if cfg.ProbeWait <= 0 {
		cfg.ProbeWait = 200 * time.Millisecond
	}
	if cfg.AskWait <= 0 {
		cfg.AskWait = 500 * time.Millisecond
	}
	if cfg.Dial == nil {
		cfg.Dial = TCP
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Watch{cfg: cfg, kick: make(chan string, 1)}
}

// Kick says that a connection from peer (a server id; "" when the peer is
// not known, e.g. without peer TLS) has ended. It never blocks.
func (w *Watch) Kick(peer string) {
	select {
	case w.kick <- peer:
	default:
		// A kick is pending: it probes the leader either way, and a
		// known peer only narrows when to probe, so "" wins.
		select {
		case <-w.kick:
		default:
		}
		select {
		case w.kick <- "":
		default:
		}
	}
}

// Stands is how many times this node stood because its leader had died.
func (w *Watch) Stands() uint64 { return w.stands.Load() }

// Run handles kicks until ctx ends.
func (w *Watch) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case peer := <-w.kick:
			w.check(ctx, peer)
		}
	}
}

// check probes the leader after a connection from peer ended and stands
// when it is dead and this node's turn has come.
func (w *Watch) check(ctx context.Context, peer string) {
	v := w.cfg.View()
	if !v.Follower || v.Leader == "" || v.Leader == v.Self || (peer != "" && peer != v.Leader) {
		return
	}
	if !slices.Contains(v.Voters, v.Self) {
		return // not a voter: a non-voter that stood would only raise the voters' term
	}
	addr, err := w.cfg.Addr(v.Leader)
	if err != nil || !w.dead(ctx, addr) {
		return
	}
	if !w.silent(ctx) {
		w.cfg.Log.Info("raftfsm: the leader's port refuses connections but the leader is still heard from",
			"leader", v.Leader, "addr", addr)
		return
	}
	rank := Rank(w.survivors(ctx, v), v.Self)
	w.cfg.Log.Info("raftfsm: the leader's process is gone (its port refuses connections)",
		"leader", v.Leader, "addr", addr, "term", v.Term, "rank", rank)
	if rank != 0 {
		return // a survivor with a longer log (or a lower id) stands
	}
	now := w.cfg.View()
	if !now.Follower || now.Term != v.Term || (now.Leader != "" && now.Leader != v.Leader) {
		return // someone stood, or a leader was elected meanwhile
	}
	if ctx.Err() != nil {
		return
	}
	if err := w.cfg.Stand(ctx); err != nil {
		w.cfg.Log.Warn("raftfsm: cannot stand for election after the leader died; raft's timeout will", "err", err)
		return
	}
	w.stands.Add(1)
	w.cfg.Log.Info("raftfsm: standing for election at once: the leader died", "leader", v.Leader, "term", v.Term)
}

// silent waits until the leader has not been heard from for Quiet, and
// reports whether it stayed silent.
func (w *Watch) silent(ctx context.Context) bool {
	last := w.cfg.View().LastContact
	wait := w.cfg.Quiet - time.Since(last)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	return w.cfg.View().LastContact.Equal(last)
}

// dead probes addr (Gone, bounded by ProbeWait).
func (w *Watch) dead(ctx context.Context, addr string) bool {
	return Gone(ctx, w.cfg.Dial, addr, w.cfg.ProbeWait)
}

// Gone probes addr with dial, within wait: refused, or accepted and then
// reset (the listener closed with the connection in its queue), is a dead
// process; anything else (accepted and open, a timeout, another error) is
// not. The raft quorum's active controller uses it for brokers too.
func Gone(ctx context.Context, dial func(ctx context.Context, addr string) (net.Conn, error), addr string, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := dial(ctx, addr)
	if err != nil {
		// A reset can reach the dialler before the connect completes.
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(dl)
	var b [1]byte
	_, err = conn.Read(b[:])
	return errors.Is(err, syscall.ECONNRESET)
}

// TCP dials addr over TCP: Gone's usual dial.
func TCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Voter is a surviving voter and the last index of its log.
type Voter struct {
	ID        string
	LastIndex uint64
}

// survivors are the voters but the leader that answer, with their last
// indexes: this node's own, the others' asked (each bounded by AskWait).
func (w *Watch) survivors(ctx context.Context, v View) []Voter {
	var out []Voter
	for _, id := range v.Voters {
		switch id {
		case v.Leader:
		case v.Self:
			out = append(out, Voter{ID: id, LastIndex: v.LastIndex})
		default:
			cctx, cancel := context.WithTimeout(ctx, w.cfg.AskWait)
			last, err := w.cfg.LastIndex(cctx, id)
			cancel()
			if err == nil {
				out = append(out, Voter{ID: id, LastIndex: last})
			}
		}
	}
	return out
}

// Rank is self's place among voters: the highest last index first, then
// by id (numeric ids in numeric order); -1 when self is not among them.
func Rank(voters []Voter, self string) int {
	sorted := slices.Clone(voters)
	slices.SortFunc(sorted, func(a, b Voter) int {
		return cmp.Or(cmp.Compare(b.LastIndex, a.LastIndex),
			cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID))
	})
	return slices.IndexFunc(sorted, func(v Voter) bool { return v.ID == self })
}
