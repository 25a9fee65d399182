package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/kafkadoor"
)

// replTrio is three real brokers in one process: node 1 leads every
// partition of its topics (replicas 1, 2, 3, all in sync) behind a real
// Kafka listener, and nodes 2 and 3 follow it over real sockets, each
// through its own peer listener (the leader's door tells followers apart
// by the listener they came through here, by their certificate in a
// cluster).
type replTrio struct {
	meta      *trioMeta
	leader    *broker.Broker
	followers []*broker.Broker
	parts     []*broker.Partition // the leader's
}

// trioMeta is the metadata both the brokers and the Kafka door read: one
// image, never changing, no controller.
type trioMeta struct{ img atomic.Pointer[raftfsm.Image] }

func (m *trioMeta) Image() (*raftfsm.Image, <-chan struct{})            { return m.img.Load(), nil }
func (m *trioMeta) Apply(context.Context, raftfsm.Command) (any, error) { return nil, nil }
func (m *trioMeta) CatchUp(context.Context) error                       { return nil }
func (m *trioMeta) Status() raftfsm.Status                              { return raftfsm.Status{LeaderID: 1} }
func (m *trioMeta) ControllerStatuses(context.Context) []raftfsm.Status { return nil }
func (m *trioMeta) BrokerLiveness(context.Context) (map[int32]raftfsm.Liveness, error) {
	return nil, nil
}

type peerListener struct {
	net.Listener
	id int32
}

type peerConn struct {
	net.Conn
	id int32
}

func (c peerConn) PeerNodeID() int32 { return c.id }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c, l.id}, nil
}

// newReplTrio starts the three brokers with n partitions in topics of
// 1,000 (fewer in one topic when n is smaller).
func newReplTrio(tb testing.TB, n int) *replTrio {
	tb.Helper()
	logger := slog.New(slog.DiscardHandler)
	per := min(n, 1000)
	var topics []*raftfsm.Topic
	for i := range n / per {
		t := &raftfsm.Topic{ID: [16]byte{byte(i >> 8), byte(i), 2}, Name: fmt.Sprintf("catchup-%04d", i), Configs: map[string]string{}}
		for range per {
			t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
		}
		topics = append(topics, t)
	}
	brokers := map[int32]*raftfsm.Broker{}
	for id := int32(1); id <= 3; id++ {
		brokers[id] = &raftfsm.Broker{ID: id, State: raftfsm.BrokerAlive}
	}
	meta := &trioMeta{}
	meta.img.Store(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(topics...), Brokers: brokers})
	newBroker := func(id int32, dial func(context.Context, int32) (net.Conn, error)) *broker.Broker {
		br, err := broker.New(broker.Config{NodeID: id, DataDir: tb.TempDir(), Files: segments.NewFileCache(5000),
			Tails: segments.NewTailCache(segments.DefaultTailBudget, 0), Logger: logger, ReplicaLagMax: time.Hour, DialLeader: dial}, meta)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { br.Close() })
		return br
	}
	tr := &replTrio{meta: meta, leader: newBroker(1, nil)}
	if err := tr.leader.Reconcile(meta.img.Load()); err != nil {
		tb.Fatal(err)
	}
	door := kafkadoor.New(kafkadoor.Config{NodeID: 1, Meta: meta, Broker: tr.leader, Logger: logger})
	srv := kafkaproto.NewServer(door, kafkaproto.Options{Logger: logger, MaxReplicaSessionPartitions: n})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{}, 2)
	tb.Cleanup(func() { cancel(); srv.Close(); <-served; <-served })
	for id := int32(2); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		go func() {
			defer func() { served <- struct{}{} }()
			srv.ServePeers(ctx, peerListener{ln, id})
		}()
		var d net.Dialer
		f := newBroker(id, func(ctx context.Context, _ int32) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		})
		tr.followers = append(tr.followers, f)
	}
	for _, f := range tr.followers {
		if err := f.Reconcile(meta.img.Load()); err != nil {
			tb.Fatal(err)
		}
	}
	for _, t := range topics {
		for i := range t.Partitions {
			p, err := tr.leader.Partition(t.Name, int32(i))
			if err != nil {
				tb.Fatal(err)
			}
			tr.parts = append(tr.parts, p)
		}
	}
	return tr
}

// bumpEpochs moves every partition's leader epoch on, as a failover
// does (without moving the leader): the leader reconciles the new image
// first, then the followers.
func (tr *replTrio) bumpEpochs(tb testing.TB) {
	tb.Helper()
	old := tr.meta.img.Load()
	var topics []*raftfsm.Topic
	for _, t := range old.Topics.All() {
		moved := *t
		moved.Partitions = append([]raftfsm.Partition(nil), t.Partitions...)
		for i := range moved.Partitions {
			moved.Partitions[i].LeaderEpoch++
		}
		topics = append(topics, &moved)
	}
	img := *old
	img.Index++
	img.Topics = raftfsm.TopicMapOf(topics...)
	tr.meta.img.Store(&img)
	for _, br := range append([]*broker.Broker{tr.leader}, tr.followers...) {
		if err := br.Reconcile(&img); err != nil {
			tb.Fatal(err)
		}
	}
}

// writeEvery appends one record to every partition as an acks=all produce
// does (kafkaproto's pipeline: every append, then every wait in turn), and
// returns when the appends were done and when the last was acknowledged.
func (tr *replTrio) writeEvery(tb testing.TB, ctx context.Context) (appended, acked time.Duration) {
	start := time.Now()
	waits := make([]broker.ReplicaWait, len(tr.parts))
	batch := recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("x"), Timestamp: 1}})
	for i, p := range tr.parts {
		_, wait, err := p.AppendForAcks(batch, nil)
		if err != nil {
			tb.Fatal(err)
		}
		waits[i] = wait
	}
	appended = time.Since(start)
	for i, wait := range waits {
		if err := wait.Wait(ctx); err != nil {
			tb.Fatalf("%s-%d: %v", tr.parts[i].Topic(), tr.parts[i].Index(), err)
		}
	}
	return appended, time.Since(start)
}

// BenchmarkFollowerCatchUp (issue 19): every one of N partitions (RF 3,
// each log written once already) takes one acks=all record at once, as
// the new leaders of a failover take a client's one produce request for
// all they lead; the time until the appends were done and until all were
// acknowledged, and the fetch requests each follower needed for it (a
// request lists at most replfetch.MaxRequestBytes of partitions, and only
// the positions it lists move the high watermark). steady: the leader's
// epoch is the one of the records written before; new-epoch: every
// partition's leader epoch moved just before (as a failover moves it:
// each follower checks its log against the leader's again, and the new
// epoch's first batch goes in every log). Three brokers in one process
// over real sockets (newReplTrio). N = 2,000 (CI's bench-short);
// 100,000 under RUNNEL_BENCH=1, or RUNNEL_BENCH_PARTITIONS (30000: the
// short form, about a minute and 90,000 log directories). With
// RUNNEL_BENCH_CPUPROFILE=path, a CPU profile of each measured phase is
// written to path.steady and path.new-epoch.
func BenchmarkFollowerCatchUp(b *testing.B) {
	n := 2_000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		n = 100_000
	}
	if v, err := strconv.Atoi(os.Getenv("RUNNEL_BENCH_PARTITIONS")); err == nil && v > 0 {
		n = v
	}
	tr := newReplTrio(b, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	first, firstAcked := tr.writeEvery(b, ctx) // each log's first write creates it on every replica
	b.Logf("first writes: appended in %.2f s, acknowledged in %.2f s", first.Seconds(), firstAcked.Seconds())
	b.Run("steady", func(b *testing.B) { tr.benchWrites(b, ctx, false) })
	b.Run("new-epoch", func(b *testing.B) { tr.benchWrites(b, ctx, true) })
}

func (tr *replTrio) benchWrites(b *testing.B, ctx context.Context, newEpoch bool) {
	var appended, acked time.Duration
	before := make([]broker.ReplicaFetchStats, len(tr.followers))
	for i, f := range tr.followers {
		before[i] = f.ReplicaFetchStats()
	}
	if path := os.Getenv("RUNNEL_BENCH_CPUPROFILE"); path != "" { // the measured writes alone
		out, err := os.Create(fmt.Sprintf("%s.%s", path, strings.TrimPrefix(b.Name(), "BenchmarkFollowerCatchUp/")))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for range b.N {
		if newEpoch {
			tr.bumpEpochs(b)
		}
		a, k := tr.writeEvery(b, ctx)
		appended += a
		acked += k
	}
	b.StopTimer()
	per := float64(b.N)
	b.ReportMetric(appended.Seconds()/per, "appended-s")
	b.ReportMetric(acked.Seconds()/per, "acked-s")
	for i, f := range tr.followers {
		s := f.ReplicaFetchStats()
		b.Logf("follower %d: %d requests listing %d, %d answered; build %.2f s, leader's answers %.2f s, apply waits %.2f s",
			i+2, s.Requests-before[i].Requests, s.Listed-before[i].Listed, s.Answered-before[i].Answered,
			(s.Build - before[i].Build).Seconds(), (s.Answer - before[i].Answer).Seconds(), (s.ApplyWait - before[i].ApplyWait).Seconds())
		b.ReportMetric(float64(s.Requests-before[i].Requests)/per, fmt.Sprintf("requests-f%d", i+2))
	}
}
