package raftfsm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nuid"
)

// Node is this process's member of the metadata quorum. Safe for concurrent use.
//
// Goroutines: raft's own (stopped by Shutdown in Close), the leader loop
// (leaderLoop), which proposes InitCluster when this node leads a cluster
// without id, and one waiter per Apply in flight (spawn). Close shuts raft
// down (which resolves every future), cancels the loop and waits for all.
type Node struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	trans  *raft.NetworkTransport
	logs   *logStore
	fsm    *fsm
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards closing; held while adding to wg
	closing bool

	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed by Close
}

// Directory layout under Config.Dir.
const (
	dirRaft      = "raft"      // badger: raft log and stable store
	dirState     = "state"     // badger: the state machine
	dirSnapshots = "snapshots" // raft file snapshot store
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
	// heartbeat interval, 2*grownTimeout/10).
	singleVoterTimeout = 100 * time.Millisecond
	grownTimeout       = 200 * time.Millisecond
	multiVoterTimeout  = time.Second
	trailingLogs       = 1024
)

// Open starts the node; on an empty Dir it bootstraps the cluster from Voters.
func Open(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "raftfsm"), done: make(chan struct{})}
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	return n, n.start(ctx)
}

func (n *Node) open() error {
	if n.cfg.Dir == "" {
		return errors.New("raftfsm: open: empty Dir")
	}
	if err := os.MkdirAll(n.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("raftfsm: open: %w", err)
	}
	rdb, err := openBadger(filepath.Join(n.cfg.Dir, dirRaft), true, n.log)
	if err != nil {
		return err
	}
	n.logs = &logStore{db: rdb}
	sdb, err := openBadger(filepath.Join(n.cfg.Dir, dirState), true, n.log)
	if err != nil {
		return err
	}
	if n.fsm, err = newFSM(sdb, n.log); err != nil {
		_ = sdb.Close()
		return err
	}
	return nil
}

func (n *Node) start(ctx context.Context) error {
	hl := hclogFor(n.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.cfg.Dir, dirSnapshots), snapshotsRetained, hl)
	if err != nil {
		return n.failStart(fmt.Errorf("raftfsm: snapshot store: %w", err))
	}
	if n.trans, err = newTransport(n.cfg, hl); err != nil {
		return n.failStart(err)
	}
	rc, voters := n.raftConfig(hl)
	existing, err := raft.HasExistingState(n.logs, n.logs, snaps)
	if err != nil {
		return n.failStart(fmt.Errorf("raftfsm: check state: %w", err))
	}
	switch {
	case existing:
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
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.logs, snaps, n.trans); err != nil {
		return n.failStart(fmt.Errorf("raftfsm: start raft: %w", err))
	}
	n.spawn(func() { n.leaderLoop(ctx, notify) })
	return nil
}

func (n *Node) failStart(err error) error {
	n.cancel()
	if n.trans != nil {
		_ = n.trans.Close()
	}
	n.closeStores()
	return err
}

func (n *Node) raftConfig(hl hclog.Logger) (*raft.Config, raft.Configuration) {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(n.cfg.NodeID)
	rc.Logger = hl
	voters := raft.Configuration{}
	for _, v := range n.cfg.Voters {
		voters.Servers = append(voters.Servers, raft.Server{
			Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Address),
		})
	}
	if len(voters.Servers) == 0 {
		voters.Servers = []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}
	}
	timeout, lease := n.cfg.ElectionTimeout, n.cfg.ElectionTimeout/2
	switch {
	case timeout != 0:
	case len(voters.Servers) == 1:
		timeout, lease = singleVoterTimeout, singleVoterTimeout
	default:
		timeout, lease = multiVoterTimeout, multiVoterTimeout/2
	}
	rc.HeartbeatTimeout = timeout
	rc.ElectionTimeout = timeout
	rc.LeaderLeaseTimeout = lease
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
	return rc, voters
}

func isMember(c raft.Configuration, id raft.ServerID) bool {
	for _, s := range c.Servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

// newTransport listens on BindAddr. Without AdvertiseAddr this node's address
// in Voters is advertised, else BindAddr with an unspecified IP (":9093")
// replaced by loopback, which only suits a single node.
func newTransport(cfg Config, hl hclog.Logger) (*raft.NetworkTransport, error) {
	adv := cfg.AdvertiseAddr
	for _, v := range cfg.Voters {
		if adv == "" && v.ID == cfg.NodeID {
			adv = v.Address
		}
	}
	if adv == "" {
		adv = cfg.BindAddr
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: advertise address %q: %w", adv, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	var advAddr net.Addr
	if port != "0" {
		if advAddr, err = net.ResolveTCPAddr("tcp", net.JoinHostPort(host, port)); err != nil {
			return nil, fmt.Errorf("raftfsm: advertise address %q: %w", adv, err)
		}
	}
	t, err := raft.NewTCPTransportWithLogger(cfg.BindAddr, advAddr, 3, 10*time.Second, hl)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: raft transport on %s: %w", cfg.BindAddr, err)
	}
	return t, nil
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

// leaderLoop follows leadership changes; as leader of a cluster without id it
// proposes one.
func (n *Node) leaderLoop(ctx context.Context, notify <-chan bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case leader := <-notify:
			n.log.Info("raftfsm: leadership changed", "leader", leader, "node", n.cfg.NodeID)
			if leader {
				n.ensureClusterID(ctx)
			}
		}
	}
}

// ensureClusterID proposes InitCluster until the image has a cluster id or
// this node is no longer leader.
func (n *Node) ensureClusterID(ctx context.Context) {
	for ctx.Err() == nil && n.raft.State() == raft.Leader {
		if err := n.raft.Barrier(defaultApplyTimeout).Error(); err == nil {
			if img, _ := n.Image(); img.ClusterID != "" {
				return
			}
			actx, cancel := context.WithTimeout(ctx, defaultApplyTimeout)
			_, err = n.Apply(actx, Command{InitCluster: &InitCluster{ClusterID: nuid.Next()}})
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Apply proposes cmd through Raft and waits until it is applied; ctx's deadline
// is the raft timeout. It returns the command's result (see each command) or
// its error (ErrTopicExists, ...). On a follower it returns ErrNotLeader.
func (n *Node) Apply(ctx context.Context, cmd Command) (any, error) {
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return nil, err
	}
	cmd, err = n.prepare(cmd)
	if err != nil {
		return nil, err
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(data, timeout)
	// raft's timeout only bounds enqueueing: wait for the outcome in an owned
	// goroutine so that ctx also bounds commit and apply.
	waited := make(chan error, 1)
	if !n.spawn(func() { waited <- f.Error() }) {
		return nil, ErrClosed
	}
	select {
	case err = <-waited:
	case <-ctx.Done():
		return nil, fmt.Errorf("raftfsm: apply (outcome unknown): %w", ctx.Err())
	}
	if err != nil {
		return nil, raftError(err)
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// spawn runs fn in a goroutine that Close waits for; false once closing.
// fn must return when raft shuts down.
func (n *Node) spawn(fn func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
	return true
}

// prepare fills in what must be decided before proposing, so that applying
// stays deterministic: version, topic id, replica placement.
func (n *Node) prepare(cmd Command) (Command, error) {
	if cmd.Version == 0 {
		cmd.Version = CommandVersion
	}
	if err := cmd.check(); err != nil {
		return cmd, err
	}
	img, _ := n.Image()
	switch {
	case cmd.CreateTopic != nil:
		ct := *cmd.CreateTopic
		if ct.TopicID == ([16]byte{}) {
			ct.TopicID = newUUID()
		}
		if ct.Assignments == nil {
			as, err := placeReplicas(img, ct.Partitions, ct.ReplicationFactor)
			if err != nil {
				return cmd, err
			}
			ct.Assignments = as
		}
		cmd.CreateTopic = &ct
	case cmd.CreatePartitions != nil && cmd.CreatePartitions.Assignments == nil:
		cp := *cmd.CreatePartitions
		t, ok := img.Topics[cp.Topic]
		if !ok {
			return cmd, fmt.Errorf("%w: %q", ErrUnknownTopic, cp.Topic)
		}
		as, err := placeReplicas(img, cp.Count-int32(len(t.Partitions)), int16(topicRF(t)))
		if err != nil {
			return cmd, err
		}
		cp.Assignments = as
		cmd.CreatePartitions = &cp
	}
	return cmd, nil
}

func newUUID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// raftError maps raft's errors to this package's.
func raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raftfsm: apply: %w (%v)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("raftfsm: apply: %w", err)
}

// Image returns the current metadata image (immutable: never modify it) and a
// channel closed when a newer image replaces it.
func (n *Node) Image() (*Image, <-chan struct{}) { return n.fsm.image() }

// WaitReady blocks until the node knows a leader, has applied the log up to
// the commit index it saw then (on the leader: everything committed, through
// a barrier), and the cluster has an id.
func (n *Node) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var target uint64
	caughtUp := false
	for {
		if n.isClosed() {
			return ErrClosed
		}
		if !caughtUp {
			caughtUp, target = n.catchUp(ctx, target)
		}
		img, changed := n.Image()
		if caughtUp && img.ClusterID != "" {
			n.tuneTimeouts()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftfsm: wait ready: %w", ctx.Err())
		case <-n.done:
			return ErrClosed
		case <-changed:
		case <-tick.C:
		}
	}
}

// catchUp reports whether this node has applied what was committed when it
// first saw a leader; target is that commit index (0: no leader seen yet).
func (n *Node) catchUp(ctx context.Context, target uint64) (bool, uint64) {
	if n.raft.State() == raft.Leader {
		timeout, err := n.leaderTimeout(ctx)
		return err == nil && n.raft.Barrier(timeout).Error() == nil, target
	}
	if target == 0 {
		if _, id := n.raft.LeaderWithID(); id == "" {
			return false, 0
		}
		target = max(n.raft.CommitIndex(), 1)
	}
	return n.raft.AppliedIndex() >= target, target
}

// tuneTimeouts lengthens the single-voter timeouts once the configuration
// has several voters (a cluster grown with AddVoter).
func (n *Node) tuneTimeouts() {
	rc := n.raft.ReloadableConfig()
	if n.cfg.ElectionTimeout != 0 || rc.HeartbeatTimeout != singleVoterTimeout {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = grownTimeout, grownTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("raftfsm: cannot lengthen raft timeouts", "err", err)
		return
	}
	n.log.Info("raftfsm: several voters, raft timeouts lengthened", "timeout", grownTimeout)
}

// Status reports the local Raft state.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	s := Status{
		ID:           n.cfg.NodeID,
		Role:         roleName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		LeaderID:     parseServerID(id),
		LeaderAddr:   string(addr),
		LastIndex:    n.raft.LastIndex(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				s.Voters = append(s.Voters, Server{ID: parseServerID(srv.ID), Address: string(srv.Address)})
			}
		}
	}
	return s
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "shutdown"
}

func (n *Node) isClosed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Close stops raft and closes the stores. Safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closing = true
		n.mu.Unlock()
		close(n.done)
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: shutdown raft: %w", err))
		}
		n.cancel()
		n.wg.Wait()
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close transport: %w", err))
		}
		errs = append(errs, n.closeStores())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func (n *Node) closeStores() error {
	var errs []error
	if n.logs != nil {
		if err := n.logs.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close raft store: %w", err))
		}
	}
	if n.fsm != nil {
		if err := n.fsm.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftfsm: close state: %w", err))
		}
	}
	return errors.Join(errs...)
}
