package raftfsm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cluster is an in-process quorum on loopback.
type cluster struct {
	t     *testing.T
	cfgs  []raftfsm.Config
	nodes []*raftfsm.Node // nil: stopped
}

func newCluster(t *testing.T, size int) *cluster {
	t.Helper()
	c := &cluster{t: t}
	var voters []raftfsm.Server
	for i := range size {
		voters = append(voters, raftfsm.Server{ID: int32(i + 1), Address: freeAddr(t)})
	}
	for i := range size {
		c.cfgs = append(c.cfgs, raftfsm.Config{
			NodeID: voters[i].ID, Dir: t.TempDir(), BindAddr: voters[i].Address,
			Voters: voters, ElectionTimeout: 300 * time.Millisecond,
			SnapshotThreshold: 2, // trailing logs 2: a lagging node needs a snapshot
		})
	}
	c.nodes = make([]*raftfsm.Node, size)
	for i := range size {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) start(i int) {
	n, err := raftfsm.Open(c.cfgs[i])
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

// leader waits until the running nodes agree on one leader and returns its index.
func (c *cluster) leader() int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, 10*time.Second, "a leader", func() bool {
		idx = -1
		var id int32 = -1
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			st := n.Status()
			if id == -1 {
				id = st.LeaderID
			}
			if st.LeaderID == -1 || st.LeaderID != id {
				return false
			}
			if st.Role == "leader" {
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

// converged waits until every running node has the same image as node i.
func (c *cluster) converged(i int) string {
	c.t.Helper()
	want, _ := c.nodes[i].Image()
	waitFor(c.t, 10*time.Second, "followers to converge", func() bool {
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
	return want.Digest()
}

func TestClusterOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node %d ready: %v", i+1, err)
		}
	}
	l := c.leader()
	clusterID := func(i int) string { img, _ := c.nodes[i].Image(); return img.ClusterID }
	for i := range c.nodes {
		if i != l {
			_, err := c.nodes[i].Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 9}})
			if !errors.Is(err, raftfsm.ErrNotLeader) {
				t.Fatalf("apply on follower %d: %v, want ErrNotLeader", i+1, err)
			}
		}
	}
	for id := int32(1); id <= 3; id++ {
		apply(t, c.nodes[l], raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: id, Rack: fmt.Sprint("r", id)}})
	}
	tp := apply(t, c.nodes[l], raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "events", Partitions: 6, ReplicationFactor: 3}}).(*raftfsm.Topic)
	leads := map[int32]int{}
	for _, p := range tp.Partitions {
		leads[p.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders not balanced: %v", leads)
	}
	c.converged(l)
	for i := range c.nodes {
		if clusterID(i) == "" || clusterID(i) != clusterID(l) {
			t.Fatalf("node %d cluster id %q, leader's %q", i+1, clusterID(i), clusterID(l))
		}
	}

	// The leader goes away: the others elect a new one and carry on.
	old := l
	c.stop(old)
	l = c.leader()
	if l == old {
		t.Fatal("stopped node still leader")
	}
	apply(t, c.nodes[l], raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "events"}})
	apply(t, c.nodes[l], raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 5}})
	if err := c.nodes[l].Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}

	// The old leader comes back and catches up from the leader's snapshot.
	var logs syncBuffer
	c.cfgs[old].Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c.start(old)
	digest := c.converged(l)
	img, _ := c.nodes[old].Image()
	if img.Topics["events"] != nil || img.NextProducerID != 5 || img.Digest() != digest {
		t.Fatalf("restarted node image: %d topics, next producer id %d", len(img.Topics), img.NextProducerID)
	}
	if !strings.Contains(logs.String(), "restored snapshot") {
		t.Error("lagging node did not install a snapshot")
	}
	if st := c.nodes[l].Status(); len(st.Voters) != 3 || st.CommitIndex < img.Index {
		t.Fatalf("leader status %+v", st)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A single node grows to three voters with AddVoter; the joiners start
// without bootstrapping (they are not among their configured voters).
func TestJoinWithAddVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	first := raftfsm.Server{ID: 1, Address: freeAddr(t)}
	c := &cluster{t: t, nodes: make([]*raftfsm.Node, 3)}
	var logs syncBuffer
	c.cfgs = append(c.cfgs, raftfsm.Config{NodeID: 1, Dir: t.TempDir(), BindAddr: first.Address,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for id := int32(2); id <= 3; id++ {
		c.cfgs = append(c.cfgs, raftfsm.Config{NodeID: id, Dir: t.TempDir(), BindAddr: freeAddr(t),
			Voters: []raftfsm.Server{first}, ElectionTimeout: 300 * time.Millisecond})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i := range c.cfgs {
		c.start(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.nodes[0].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	apply(t, c.nodes[0], raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})
	for i := 1; i < 3; i++ {
		if err := c.nodes[i].AddVoter(ctx, raftfsm.Server{ID: 9, Address: "x:1"}); !errors.Is(err, raftfsm.ErrNotLeader) {
			t.Fatalf("add voter on a non-member: %v", err)
		}
		s := raftfsm.Server{ID: c.cfgs[i].NodeID, Address: c.cfgs[i].BindAddr}
		if err := c.nodes[0].AddVoter(ctx, s); err != nil {
			t.Fatalf("add voter %d: %v", s.ID, err)
		}
	}
	for i, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node %d ready: %v", i+1, err)
		}
	}
	c.converged(0)
	if !strings.Contains(logs.String(), "raft timeouts lengthened") {
		t.Error("grown quorum kept the single-voter timeouts")
	}
	if st := c.nodes[2].Status(); len(st.Voters) != 3 || st.LeaderID != 1 || st.LeaderAddr != first.Address {
		t.Fatalf("joiner status %+v", st)
	}
	if err := c.nodes[0].RemoveVoter(ctx, 3); err != nil {
		t.Fatalf("remove voter: %v", err)
	}
	waitFor(t, 5*time.Second, "voter removed", func() bool { return len(c.nodes[1].Status().Voters) == 2 })
}

// Five voters survive two failures; a third loses the quorum and writes
// fail until a voter returns.
func TestClusterOfFiveQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	c := newCluster(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node %d ready: %v", i+1, err)
		}
	}
	l := c.leader()
	var down []int
	for i := range c.nodes {
		if i != l && len(down) < 3 {
			down = append(down, i)
		}
	}
	c.stop(down[0])
	c.stop(down[1])
	apply(t, c.nodes[l], raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})

	c.stop(down[2])
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err := c.nodes[l].Apply(short, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 2}})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, raftfsm.ErrNotLeader) {
		t.Fatalf("apply without quorum: %v", err)
	}

	c.start(down[2])
	l = c.leader()
	apply(t, c.nodes[l], raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 3}})
	c.converged(l)
	img, _ := c.nodes[l].Image()
	if img.Brokers[1] == nil || img.Brokers[3] == nil {
		t.Fatalf("brokers %v", img.Brokers)
	}
}
