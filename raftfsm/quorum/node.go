package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/internode"
	"github.com/runnel/runnel/raftfsm"
)

// Node is this process's member of the metadata quorum. Safe for concurrent use.
//
// Goroutines: raft's own (stopped by Shutdown in Close), the leader loop
// (leaderLoop), which proposes InitCluster when this node leads a cluster
// without id, the loops of quorum.go (startQuorum, the leader watch among
// them) and one waiter per Apply in flight (spawn). Close shuts raft
// down (which resolves every future), cancels the loop and waits for all.
type Node struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	trans  *gatedTransport
	auth   *internode.Auth // inter-node TLS; nil: plaintext (package internode)
	logs   *raftLog        // raft log and stable store (raftlog.go)
	fsm    *raftfsm.FSM
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards closing; held while adding to wg
	closing bool

	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed by Close

	q quorum // mux, controller RPC, broker sessions (quorum.go)

	reserved reservations // partitions of proposals in flight (reserve.go)

	leaderIndex leaderIndexCalls // CatchUp's coalesced leader queries (catchup.go)
}

// Directory layout under Config.Dir.
const (
	dirRaftLog    = "raftlog"     // raft-wal: raft log and stable store
	dirRaftLogTmp = "raftlog.tmp" // a raft log being moved from dirRaft
	dirRaft       = "raft"        // badger: the raft log before raft-wal, moved on open
	dirState      = "state"       // badger: the state machine
	dirSnapshots  = "snapshots"   // raft file snapshot store
)

// Default tuning.
const (
	defaultApplyTimeout      = 10 * time.Second
	defaultSnapshotThreshold = 8192
	defaultSnapshotInterval  = 2 * time.Minute
	snapshotsRetained        = 2
	// Raft heartbeat/election timeouts when Config.ElectionTimeout is 0. A
	// lone voter elects itself after one timeout, so it is short; a quorum
	// that grew from one voter is moved to grownTimeout (the leader lease,
	// fixed at start at singleVoterTimeout, stays 2.5 times the longest
	// heartbeat interval, 2*grownTimeout/10). multiVoterTimeout: see
	// raftConfig for what a failover takes and why this value.
	singleVoterTimeout = 100 * time.Millisecond
	// loneVoterElection is a lone voter's election timeout: its election
	// needs only its own vote, won once the vote is written, so a longer
	// timeout delays nothing, while the short one restarted the election
	// (a WARN on a healthy node) when that write took longer than it on a
	// loaded machine's disk (370 ms seen at load 40).
	loneVoterElection = 5 * time.Second
	grownTimeout      = 200 * time.Millisecond
	multiVoterTimeout = time.Second
	trailingLogs      = 1024
)

// Open starts the node; on an empty Dir it bootstraps the cluster from Voters.
func Open(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	if n.cfg.Dir == "" {
		return errors.New("raftfsm: open: empty Dir")
	}
	// 0700: the metadata (users, configs) is for this node's user only.
	// raft's snapshot store makes its directories 0755 itself, so they are
	// made first (MkdirAll keeps an existing directory's mode).
	if err := os.MkdirAll(filepath.Join(n.cfg.Dir, dirSnapshots, "snapshots"), 0o700); err != nil {
		return fmt.Errorf("raftfsm: open: %w", err)
	}
	// Dir is raftfsm's own: one made 0755 by an older version is tightened.
	if err := os.Chmod(n.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("raftfsm: open: %w", err)
	}
	// The state store writes without a sync of its own: it is derived from
	// the raft log (synced on every append, before anything commits) and
	// the snapshots. A crash of the machine may cost it its last batches;
	// on start raft restores the newest snapshot and replays the log after
	// it, and ApplyBatch skips what the state already holds
	// (TestStateStoreBehindLog). A metadata write then waits for one sync,
	// the log's, not two (issue 19).
	sdb, err := raftfsm.OpenBadger(filepath.Join(n.cfg.Dir, dirState), false, n.log)
	if err != nil {
		return err
	}
	if n.fsm, err = raftfsm.NewFSM(sdb, n.log); err != nil {
		_ = sdb.Close()
		return err
	}
	// Opened after the state store, whose directory lock refuses a second
	// process (a running node when RecoverQuorum is run): raft-wal's bbolt
	// file would wait for its lock instead.
	if n.logs, err = openRaftLog(n.cfg.Dir, n.cfg.RaftLogSegmentBytes, n.log); err != nil {
		return err
	}
	// A failed write of the state store stops the node as one of the log
	// does (failstop.go).
	n.fsm.OnFailure(n.logs.writes.stateFailed)
	return nil
}

func (n *Node) start(ctx context.Context) error {
	hl := hclogFor(n.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.cfg.Dir, dirSnapshots), snapshotsRetained, hl)
	if err != nil {
		return n.failStart(fmt.Errorf("raftfsm: snapshot store: %w", err))
	}
	if n.trans, err = n.newMuxTransport(hl); err != nil {
		return n.failStart(err)
	}
	existing, err := raft.HasExistingState(n.logs, n.logs, snaps)
	if err != nil {
		return n.failStart(fmt.Errorf("raftfsm: check state: %w", err))
	}
	voters := n.bootstrapVoters()
	voterCount := len(voters.Servers)
	if !isMember(voters, serverID(n.cfg.NodeID)) {
		voterCount++ // joining a quorum
	}
	if existing {
		if voterCount, err = storedVoterCount(n.logs, snaps); err != nil {
			return n.failStart(err)
		}
	}
	rc := n.raftConfig(hl, voterCount)
	n.log.Info("raftfsm: starting raft", "node", n.cfg.NodeID, "existing_state", existing,
		"voters", voterCount, "election_timeout", rc.ElectionTimeout, "heartbeat_timeout", rc.HeartbeatTimeout)
	joinNeeded := false
	switch {
	case existing:
	case n.isNonvoter():
		n.log.Info("raftfsm: broker-only node, joining the quorum as a non-voter", "node", n.cfg.NodeID)
		joinNeeded = true
	case !isMember(voters, rc.LocalID):
		// Not a voter: wait to be added by the leader (AddVoter/AddNonvoter).
		n.log.Info("raftfsm: not among the voters, waiting to be added", "node", n.cfg.NodeID)
	default:
		n.log.Info("raftfsm: bootstrapping cluster", "voters", len(voters.Servers))
		if err := raft.BootstrapCluster(rc, n.logs, n.logs, snaps, n.trans, voters); err != nil {
			return n.failStart(fmt.Errorf("raftfsm: bootstrap: %w", err))
		}
	}
	notify := make(chan bool, 16)
	rc.NotifyCh = notify
	n.q.watch = n.newWatch(rc.HeartbeatTimeout)
	n.q.stream.ended = n.q.watch.Kick // before the mux starts (startQuorum)
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.logs, snaps, n.trans); err != nil {
		return n.failStart(fmt.Errorf("raftfsm: start raft: %w", err))
	}
	n.spawn(func() { n.leaderLoop(ctx, notify) })
	n.startQuorum(ctx, joinNeeded)
	return nil
}

func (n *Node) failStart(err error) error {
	n.cancel()
	if n.trans != nil {
		n.trans.drain()
		_ = n.trans.Close()
	}
	_ = n.closeQuorum()
	n.closeStores()
	return err
}

// bootstrapVoters is the configuration a new cluster starts with: Voters, or
// this node alone.
func (n *Node) bootstrapVoters() raft.Configuration {
	var c raft.Configuration
	for _, v := range n.cfg.Voters {
		c.Servers = append(c.Servers, raft.Server{
			Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Address),
		})
	}
	if len(c.Servers) == 0 {
		c.Servers = []raft.Server{{Suffrage: raft.Voter, ID: serverID(n.cfg.NodeID), Address: n.trans.LocalAddr()}}
	}
	return c
}

// raftConfig tunes raft for a quorum of the given number of voters.
//
// What a failover takes with hashicorp/raft, timeout T (heartbeat and
// election timeout alike): a follower checks for its leader at random
// intervals of T to 2T and stands only once it has heard nothing for T,
// so it stands 1T to 3T after the leader's last heartbeat; and another
// follower grants a (pre-)vote only once it has lost the leader too, so
// with two survivors the later of the two decides: about 2T on average,
// at most 3T, plus two round trips and the new leader's first commit.
// T = 300ms fails over in under a second, but on a machine as loaded as
// this project's (load 20 to 40 on 2 cores) a leader's heartbeats come
// late by more than that every few seconds, and the controllers elected
// one another without end (docs/scale.md, "Controller scale"): the
// default for several voters stays 1s, and a closing leader hands over at
// once (handOver). A crashed leader is noticed without the timeout too: its
// connections end and its port refuses, and the leader watch (watch.go)
// has a survivor stand at once; only a leader that hangs, or a machine
// cut off, waits out the timeouts.
//
// The leader lease (a leader that has not heard from a quorum for it
// steps down) is T, the most raft allows: it decides nothing but when a
// cut-off leader gives up (broker leases and reads are confirmed by
// VerifyLeader rounds, not by the lease), and at T/2 a leader whose
// heartbeat answers came late on a loaded machine abdicated while its
// followers still followed it.
func (n *Node) raftConfig(hl hclog.Logger, voters int) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(n.cfg.NodeID)
	rc.Logger = hl
	timeout := n.cfg.ElectionTimeout
	switch {
	case timeout != 0:
	case voters <= 1:
		timeout = singleVoterTimeout
	default:
		timeout = multiVoterTimeout
	}
	rc.HeartbeatTimeout = timeout
	rc.ElectionTimeout = timeout
	if n.cfg.ElectionTimeout == 0 && voters <= 1 {
		rc.ElectionTimeout = loneVoterElection // tuneTimeouts shortens it if voters join
	}
	rc.LeaderLeaseTimeout = timeout
	rc.CommitTimeout = min(rc.CommitTimeout, timeout/4)
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	if rc.SnapshotThreshold == 0 {
		rc.SnapshotThreshold = defaultSnapshotThreshold
	}
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	if rc.SnapshotInterval == 0 {
		rc.SnapshotInterval = defaultSnapshotInterval
	}
	rc.TrailingLogs = min(trailingLogs, rc.SnapshotThreshold)
	return rc
}

// storedVoterCount counts the voters of the newest configuration in the
// stores: the last configuration entry in the log, else the newest
// snapshot's.
func storedVoterCount(logs raft.LogStore, snaps raft.SnapshotStore) (int, error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, fmt.Errorf("raftfsm: list snapshots: %w", err)
	}
	var cfg raft.Configuration
	var floor uint64
	if len(metas) > 0 {
		cfg, floor = metas[0].Configuration, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, err
	}
	for i := last; i >= max(first, floor+1, 1); i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return 0, fmt.Errorf("raftfsm: read log %d: %w", i, err)
		}
		if l.Type == raft.LogConfiguration {
			cfg = raft.DecodeConfiguration(l.Data)
			break
		}
	}
	voters := 0
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	return voters, nil
}

func isMember(c raft.Configuration, id raft.ServerID) bool {
	for _, s := range c.Servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.FormatInt(int64(id), 10)) }

// parseServerID maps a raft server id back to a node id, -1 when unknown.
func parseServerID(id raft.ServerID) int32 {
	v, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil || id == "" {
		return -1
	}
	return int32(v)
}

func (n *Node) isClosed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Close stops raft and closes the stores. Safe to call more than once. An
// active controller first hands its leadership over (handOver).
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.handOver()
		n.mu.Lock()
		n.closing = true
		n.mu.Unlock()
		close(n.done)
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: shutdown raft: %w", err))
		}
		n.cancel()
		if err := n.closeQuorum(); err != nil {
			errs = append(errs, err)
		}
		n.wg.Wait()
		// raft is down; heartbeats it answered on transport goroutines may
		// still be running and would write its term to the stores.
		n.trans.drain()
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close transport: %w", err))
		}
		errs = append(errs, n.closeStores())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// handOver, on the leader, has raft hand leadership to the most up-to-date
// voter (TimeoutNow: it stands at once, without a heartbeat timeout),
// and waits until this node has stepped down or the hand-over failed.
// Without it the others notice the leader gone only one to three election
// timeouts after it stopped (see raftConfig): a SIGTERM of the active
// controller (a rolling restart) left the cluster without one for that
// long. Meanwhile raft refuses new proposals here (ErrNotLeader, retried
// on the successor). raft bounds the hand-over by two election timeouts,
// and so does the wait; a failure only leaves the election to the timeouts.
func (n *Node) handOver() {
	if n.raft.State() != raft.Leader {
		return
	}
	timeout := 2 * n.raft.ReloadableConfig().ElectionTimeout
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-futureError(n.raft.LeadershipTransfer()):
		if err != nil {
			n.log.Info("raftfsm: leadership not handed over before closing", "node", n.cfg.NodeID, "err", err)
			return
		}
		n.log.Info("raftfsm: leadership handed over before closing", "node", n.cfg.NodeID)
	case <-t.C:
		n.log.Info("raftfsm: leadership hand-over still running at close", "node", n.cfg.NodeID, "waited", timeout)
	}
}

func (n *Node) closeStores() error {
	var errs []error
	if n.logs != nil {
		if err := n.logs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close raft store: %w", err))
		}
	}
	if n.fsm != nil {
		if err := n.fsm.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close state: %w", err))
		}
	}
	return errors.Join(errs...)
}
