package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/syncbuf"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cluster is an in-process quorum on loopback, with the default (1s) raft
// timeouts: tests run on shared, loaded machines, and the helpers follow the
// leader when it changes instead of assuming it stays put.
type cluster struct {
	t     testing.TB
	cfgs  []quorum.Config
	logs  []*syncbuf.Buffer
	nodes []*quorum.Node // nil: stopped
}

func newCluster(t *testing.T, size int) *cluster {
	t.Helper()
	var voters []raftfsm.Server
	for i := range size {
		voters = append(voters, raftfsm.Server{ID: int32(i + 1), Address: freeAddr(t)})
	}
	c := &cluster{t: t}
	for i := range size {
		c.add(quorum.Config{
			NodeID: voters[i].ID, BindAddr: voters[i].Address, Voters: voters,
			SnapshotThreshold: 2, // trailing logs 2: a lagging node needs a snapshot
		})
	}
	for i := range size {
		c.start(i)
	}
	return c
}

// add registers a node configuration (Dir and Logger filled in).
func (c *cluster) add(cfg quorum.Config) {
	buf := &syncbuf.Buffer{}
	cfg.Dir = c.t.TempDir()
	i := len(c.nodes)
	c.t.Cleanup(func() { c.stop(i) }) // before the TempDir goes (cleanups run last first)
	cfg.Logger = slog.New(slog.NewTextHandler(buf, nil))
	c.cfgs = append(c.cfgs, cfg)
	c.logs = append(c.logs, buf)
	c.nodes = append(c.nodes, nil)
}

func (c *cluster) start(i int) {
	n, err := quorum.Open(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("open node %d: %v", i+1, err)
	}
	c.nodes[i] = n
}

func (c *cluster) stop(i int) {
	if c.nodes[i] != nil {
		if err := c.nodes[i].Close(); err != nil {
			c.t.Errorf("close node %d: %v", i+1, err)
		}
		c.nodes[i] = nil
	}
}

func (c *cluster) waitReady() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, n := range c.nodes {
		if n != nil {
			if err := n.WaitReady(ctx); err != nil {
				c.t.Fatalf("node %d ready: %v", i+1, err)
			}
		}
	}
}

// leader waits for a running node that leads with the highest term seen.
func (c *cluster) leader() int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, 30*time.Second, "a leader", func() bool {
		idx = -1
		var term uint64
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			st := n.Status()
			if st.Term > term {
				term, idx = st.Term, -1
			}
			if st.Role == "leader" && st.Term == term {
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

// retry runs op on the leader until it succeeds or fails for another reason
// than leadership moving or a lost quorum.
func (c *cluster) retry(op func(ctx context.Context, n *quorum.Node) error) error {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := op(ctx, c.nodes[c.leader()])
		cancel()
		retriable := errors.Is(err, raftfsm.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded)
		if !retriable || time.Now().After(deadline) {
			return err
		}
	}
}

// apply applies cmd on the leader, following it. A retried command may have
// been applied by the attempt that lost leadership.
func (c *cluster) apply(cmd raftfsm.Command) (any, error) {
	c.t.Helper()
	var res any
	err := c.retry(func(ctx context.Context, n *quorum.Node) (err error) {
		res, err = n.Apply(ctx, cmd)
		return err
	})
	return res, err
}

func (c *cluster) mustApply(cmd raftfsm.Command) any {
	c.t.Helper()
	res, err := c.apply(cmd)
	if err != nil {
		c.t.Fatalf("apply %+v: %v", cmd, err)
	}
	return res
}

// converged waits until every running node has the same image as the leader.
func (c *cluster) converged() *raftfsm.Image {
	c.t.Helper()
	var want *raftfsm.Image
	waitFor(c.t, 30*time.Second, "the nodes to converge", func() bool {
		want, _ = c.nodes[c.leader()].Image()
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			img, _ := n.Image()
			if img.Index != want.Index || img.Digest() != want.Digest() {
				return false
			}
		}
		return true
	})
	return want
}

func TestClusterOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	c := newCluster(t, 3)
	c.waitReady()
	for i, n := range c.nodes {
		if n.Status().Role == "leader" {
			continue
		}
		// Forwarded to the leader.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
		cancel()
		if _, ok := res.(int64); err != nil || !ok {
			t.Fatalf("apply on follower %d: %v, %v", i+1, res, err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		c.mustApply(raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: id, Rack: fmt.Sprint("r", id)}})
	}
	_, err := c.apply(raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "events", Partitions: 6, ReplicationFactor: 3}})
	if err != nil && !errors.Is(err, raftfsm.ErrTopicExists) {
		t.Fatal(err)
	}
	img := c.converged()
	leads := map[int32]int{}
	for _, p := range img.Topics.Get("events").Partitions {
		leads[p.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders not balanced: %v", leads)
	}
	for i, n := range c.nodes {
		if got, _ := n.Image(); got.ClusterID == "" || got.ClusterID != img.ClusterID {
			t.Fatalf("node %d cluster id %q, leader's %q", i+1, got.ClusterID, img.ClusterID)
		}
	}

	// The leader goes away: the others elect a new one and carry on.
	old := c.leader()
	c.stop(old)
	if l := c.leader(); l == old {
		t.Fatal("stopped node still leader")
	}
	if _, err := c.apply(raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "events"}}); err != nil && !errors.Is(err, raftfsm.ErrUnknownTopic) {
		t.Fatal(err)
	}
	c.mustApply(raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 5}})
	if err := c.nodes[c.leader()].Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}

	// The old leader comes back and catches up from the leader's snapshot.
	c.start(old)
	img = c.converged()
	if img.Topics.Get("events") != nil || img.NextProducerID < 5 {
		t.Fatalf("image: %d topics, next producer id %d", img.Topics.Len(), img.NextProducerID)
	}
	if !strings.Contains(c.logs[old].String(), "restored snapshot") {
		t.Error("lagging node did not install a snapshot")
	}
	// raft records the snapshot as applied just after the FSM restored it.
	waitFor(t, 10*time.Second, "the restarted node's raft status", func() bool {
		st := c.nodes[old].Status()
		return len(st.Voters) == 3 && st.AppliedIndex >= img.Index && st.LeaderID >= 1
	})
}

// A single node grows to three voters with AddVoter; the joiners start
// without bootstrapping (they are not among their configured voters).
func TestJoinWithAddVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	first := raftfsm.Server{ID: 1, Address: freeAddr(t)}
	c := &cluster{t: t}
	c.add(quorum.Config{NodeID: 1, BindAddr: first.Address})
	for id := int32(2); id <= 3; id++ {
		c.add(quorum.Config{NodeID: id, BindAddr: freeAddr(t), Voters: []raftfsm.Server{first}, Voter: true})
	}
	for i := range c.cfgs {
		c.start(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[0].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c.mustApply(raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})
	// A node not yet added knows no leader: it retries until ctx is done.
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := c.nodes[1].AddVoter(sctx, raftfsm.Server{ID: 9, Address: "x:1"})
	scancel()
	if !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("add voter on a non-member: %v", err)
	}
	for i := 1; i < 3; i++ {
		s := raftfsm.Server{ID: c.cfgs[i].NodeID, Address: c.cfgs[i].BindAddr}
		if err := c.retry(func(ctx context.Context, n *quorum.Node) error { return n.AddVoter(ctx, s) }); err != nil {
			t.Fatalf("add voter %d: %v", s.ID, err)
		}
	}
	c.waitReady()
	c.converged()
	if st := c.nodes[2].Status(); len(st.Voters) != 3 || st.LeaderID < 1 || st.LeaderAddr == "" {
		t.Fatalf("joiner status %+v", st)
	}
	waitFor(t, 10*time.Second, "node 1 to lengthen its timeouts", func() bool {
		return strings.Contains(c.logs[0].String(), "raft timeouts lengthened")
	})

	// Restarted, node 1 sizes its timeouts from the stored configuration.
	c.stop(0)
	c.start(0)
	c.waitReady()
	if log := c.logs[0].String(); !strings.Contains(log, "voters=3 election_timeout=1s") {
		t.Errorf("restart did not use the multi-voter timeouts:\n%s", log)
	}

	if err := c.retry(func(ctx context.Context, n *quorum.Node) error { return n.RemoveVoter(ctx, 3) }); err != nil {
		t.Fatalf("remove voter: %v", err)
	}
	waitFor(t, 10*time.Second, "voter removed", func() bool { return len(c.nodes[c.leader()].Status().Voters) == 2 })
}

// Five voters survive two failures; a third loses the quorum and writes
// fail until a voter returns.
func TestClusterOfFiveQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	c := newCluster(t, 5)
	c.waitReady()
	l := c.leader()
	var down []int
	for i := range c.nodes {
		if i != l && len(down) < 3 {
			down = append(down, i)
		}
	}
	c.stop(down[0])
	c.stop(down[1])
	c.mustApply(raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})

	// Ask the node that led before the third stop: without a quorum its
	// leadership lapses (the lease), and then no node would be a leader to
	// wait for (c.leader() timed out on a loaded machine).
	last := c.nodes[c.leader()]
	c.stop(down[2])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := last.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 2}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("apply without quorum: %v", err)
	}

	c.start(down[2])
	c.mustApply(raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 3}})
	img := c.converged()
	if img.Brokers[1] == nil || img.Brokers[3] == nil {
		t.Fatalf("brokers %v", img.Brokers)
	}
}
