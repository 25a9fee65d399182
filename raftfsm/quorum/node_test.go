package quorum_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// freeAddr returns a loopback address with a port free right now, from
// below the ephemeral range (see internal/testport).
func freeAddr(t testing.TB) string {
	t.Helper()
	return testport.FreeAddr(t)
}

func openSingle(t *testing.T, dir string) *quorum.Node {
	t.Helper()
	n, err := quorum.Open(quorum.Config{NodeID: 1, Dir: dir, BindAddr: freeAddr(t)})
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

func apply(t *testing.T, n *quorum.Node, cmd raftfsm.Command) any {
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
	t.Logf("ready in %v (timing is measured, not asserted: CI machines are shared)", time.Since(start))
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
	if got := img2.Topics.Get("orders").Configs["retention.ms"]; got != "1000" {
		t.Fatalf("config after restart %q", got)
	}
}

func TestRestartDoesNotReapply(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	alloc := raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 100}}
	apply(t, n, alloc)
	if err := n.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Entries after the snapshot are replayed by raft on restart.
	apply(t, n, alloc)
	apply(t, n, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})
	img, _ := n.Image()
	want := img.Digest()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		n = openSingle(t, dir)
		img, _ = n.Image()
		if img.NextProducerID != 200+int64(round)*100 || img.Digest() != want {
			t.Fatalf("restart %d: next producer id %d, digest changed %v", round, img.NextProducerID, img.Digest() != want)
		}
		if first := apply(t, n, alloc).(int64); first != 200+int64(round)*100 {
			t.Fatalf("restart %d: allocated %d", round, first)
		}
		img, _ = n.Image()
		want = img.Digest()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecoverStateFromSnapshotAndLog(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	apply(t, n, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})
	apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "a", Partitions: 2, ReplicationFactor: 1}})
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "b", Partitions: 1, ReplicationFactor: 1}})
	img, _ := n.Image()
	want := img.Digest()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// Lose the state machine's badger directory: the snapshot plus the log
	// after it rebuild the same state.
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	n = openSingle(t, dir)
	img, _ = n.Image()
	if img.Digest() != want || img.Topics.Get("b") == nil {
		t.Fatalf("rebuilt state differs: topics %v", img.Topics.Len())
	}
}

func TestApplyErrors(t *testing.T) {
	n := openSingle(t, t.TempDir())
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		cmd  raftfsm.Command
		err  error
	}{
		{"no brokers yet", nil, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "a", Partitions: 1, ReplicationFactor: 1}}, raftfsm.ErrNotEnoughBrokers},
		{"zero partitions", nil, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "a", ReplicationFactor: 1}}, raftfsm.ErrInvalidPartitions},
		{"empty envelope", nil, raftfsm.Command{}, raftfsm.ErrInvalidCommand},
		{"two commands", nil, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{}, InitCluster: &raftfsm.InitCluster{}}, raftfsm.ErrInvalidCommand},
		{"future version", nil, raftfsm.Command{Version: 9, DeleteTopic: &raftfsm.DeleteTopic{}}, raftfsm.ErrInvalidCommand},
		{"unknown topic", nil, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "x"}}, raftfsm.ErrUnknownTopic},
		{"too big", nil, raftfsm.Command{AlterConfigs: &raftfsm.AlterConfigs{Topic: "x", Set: map[string]string{"v": strings.Repeat("x", 2<<20)}}}, raftfsm.ErrInvalidCommand},
		{"expired context", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "x"}}, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			if _, err := n.Apply(ctx, tc.cmd); !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
		})
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(context.Background(), raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "x"}}); !errors.Is(err, raftfsm.ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
	if err := n.WaitReady(context.Background()); !errors.Is(err, raftfsm.ErrClosed) {
		t.Fatalf("wait ready after close: %v", err)
	}
	if st := n.Status(); st.Role != "shutdown" {
		t.Fatalf("status after close %+v", st)
	}
}

func BenchmarkApplySingleNode(b *testing.B) {
	dir := b.TempDir()
	addr := freeAddr(b)
	n, err := quorum.Open(quorum.Config{NodeID: 1, Dir: dir, BindAddr: addr})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	if err := n.WaitReady(context.Background()); err != nil {
		b.Fatal(err)
	}
	cmd := raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}
	b.ResetTimer()
	for b.Loop() {
		if _, err := n.Apply(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// Concurrent Apply calls and image readers: every allocation is distinct and
// readers watching the change channel see the final image.
func TestConcurrentApplyAndReaders(t *testing.T) {
	n := openSingle(t, t.TempDir())
	const writers, each = 4, 10
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	seen := make(chan int64, 2)
	for range 2 {
		go func() {
			var last int64
			for {
				img, changed := n.Image()
				_ = img.Digest()
				last = img.NextProducerID
				if last == writers*each {
					seen <- last
					return
				}
				select {
				case <-changed:
				case <-done:
					seen <- last
					return
				}
			}
		}()
	}
	firsts := make(chan int64, writers*each)
	errs := make(chan error, writers)
	for range writers {
		go func() {
			for range each {
				res, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
				if err != nil {
					errs <- err
					return
				}
				firsts <- res.(int64)
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(firsts)
	got := map[int64]bool{}
	for id := range firsts {
		if got[id] {
			t.Fatalf("producer id %d allocated twice", id)
		}
		got[id] = true
	}
	timer := time.AfterFunc(5*time.Second, func() { close(done) })
	defer timer.Stop()
	for range 2 {
		if last := <-seen; last != writers*each {
			t.Fatalf("reader stopped at %d, want %d", last, writers*each)
		}
	}
}

// BenchmarkApplyParallel proposes from 32 goroutines: raft batches the log
// writes and the state machine applies in batches.
func BenchmarkApplyParallel(b *testing.B) {
	addr := freeAddr(b)
	n, err := quorum.Open(quorum.Config{NodeID: 1, Dir: b.TempDir(), BindAddr: addr})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	if err := n.WaitReady(context.Background()); err != nil {
		b.Fatal(err)
	}
	cmd := raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Apply(context.Background(), cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBootstrapReady measures Open to WaitReady on an empty directory
// (bootstrap, self-election, cluster id); the product target is well under
// a second.
func BenchmarkBootstrapReady(b *testing.B) {
	for b.Loop() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		n, err := quorum.Open(quorum.Config{NodeID: 1, Dir: b.TempDir(), BindAddr: addr})
		if err != nil {
			b.Fatal(err)
		}
		if err := n.WaitReady(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
