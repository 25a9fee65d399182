package raftfsm_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func openSingle(t *testing.T, dir string) *raftfsm.Node {
	t.Helper()
	n, err := raftfsm.Open(raftfsm.Config{NodeID: 1, Dir: dir, BindAddr: freeAddr(t)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("wait ready: %v", err)
	}
	return n
}

func apply(t *testing.T, n *raftfsm.Node, cmd raftfsm.Command) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Apply(ctx, cmd)
	if err != nil {
		t.Fatalf("apply %+v: %v", cmd, err)
	}
	return res
}

func TestSingleNodeBootstrapAndRestart(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	n := openSingle(t, dir)
	ready := time.Since(start)
	t.Logf("ready in %v", ready)
	if ready > time.Second {
		t.Errorf("ready after %v, want well under a second", ready)
	}
	st := n.Status()
	if st.Role != "leader" || st.LeaderID != 1 || len(st.Voters) != 1 {
		t.Fatalf("status %+v", st)
	}
	img, changed := n.Image()
	if img.ClusterID == "" {
		t.Fatal("no cluster id")
	}
	clusterID := img.ClusterID

	b := apply(t, n, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1, HTTPAddr: "127.0.0.1:8080"}}).(*raftfsm.Broker)
	if b.Epoch == 0 || b.State != raftfsm.BrokerAlive {
		t.Fatalf("broker %+v", b)
	}
	select {
	case <-changed:
	default:
		t.Fatal("image change not signalled")
	}
	tp := apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "orders", Partitions: 3, ReplicationFactor: 1}}).(*raftfsm.Topic)
	if len(tp.Partitions) != 3 || tp.Partitions[2].Leader != 1 || tp.ID == ([16]byte{}) {
		t.Fatalf("topic %+v", tp)
	}
	_, err := n.Apply(context.Background(), raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "orders", Partitions: 1, ReplicationFactor: 1}})
	if !errors.Is(err, raftfsm.ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	apply(t, n, raftfsm.Command{AlterConfigs: &raftfsm.AlterConfigs{Topic: "orders", Set: map[string]string{"retention.ms": "1000"}}})
	apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "gone", Partitions: 1, ReplicationFactor: 1}})
	apply(t, n, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "gone"}})
	img, _ = n.Image()
	digest, index := img.Digest(), img.Index
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	n2 := openSingle(t, dir)
	img2, _ := n2.Image()
	if img2.ClusterID != clusterID || img2.Digest() != digest {
		t.Fatalf("after restart: cluster %q digest %s, want %q %s", img2.ClusterID, img2.Digest(), clusterID, digest)
	}
	if img2.Index != index {
		t.Fatalf("after restart index %d, want %d", img2.Index, index)
	}
	if got := img2.Topics["orders"].Configs["retention.ms"]; got != "1000" {
		t.Fatalf("config after restart %q", got)
	}
}
