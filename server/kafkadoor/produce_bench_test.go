package kafkadoor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/metrics"
	"github.com/runnel/runnel/server/quota"
)

// BenchmarkProduceRequestEachPartition is one acks=all Produce request of
// an idempotent producer with one record for each of a leader's
// partitions, over a socket to the Kafka door of a real broker (RF 1, so
// the wait is the high watermark the append moves): what a new leader
// receives after a kill -9 at scale (issue 19: franz-go sent a leader one
// request of 6.7 MB for its ~100,000 partitions, not answered within the
// client's 20 s). 2,000 partitions (10,000 and 100,000 with
// RUNNEL_BENCH=1), every log written once before, with the default 1,024
// segment files kept open and with room for all (as the descriptor limit
// allows). us/partition is the request's wall time over its partitions,
// cpu-us/partition the process's CPU in it (user and kernel: steadier
// than wall time on a shared machine), sys-us/partition the kernel's
// part. RUNNEL_BENCH_PROFILE=file writes a CPU profile of the measured requests.
func BenchmarkProduceRequestEachPartition(b *testing.B) {
	sizes := []int{2_000}
	if os.Getenv("RUNNEL_BENCH") == "1" {
		sizes = []int{10_000, 100_000}
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	for _, parts := range sizes {
		for _, files := range []int{1024, min(parts+1000, int(lim.Cur)-1000)} {
			b.Run(fmt.Sprintf("parts=%d/files=%d", parts, files), func(b *testing.B) {
				benchProduceRequest(b, parts, files)
			})
		}
	}
}

func benchProduceRequest(b *testing.B, parts, files int) {
	const perTopic = 1000
	var topics []*raftfsm.Topic
	for i := range (parts + perTopic - 1) / perTopic {
		t := &raftfsm.Topic{ID: [16]byte{byte(i), byte(i >> 8), 1}, Name: fmt.Sprintf("each-%04d", i), Configs: map[string]string{}}
		for range min(perTopic, parts-i*perTopic) {
			t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}})
		}
		topics = append(topics, t)
	}
	img := &raftfsm.Image{Index: 2, ClusterID: "c", Topics: raftfsm.TopicMapOf(topics...),
		Brokers: map[int32]*raftfsm.Broker{1: {ID: 1, State: raftfsm.BrokerAlive, KafkaAddr: "127.0.0.1:9092"}}}
	logger := slog.New(slog.DiscardHandler)
	br, err := broker.New(broker.Config{NodeID: 1, DataDir: b.TempDir(), Files: segments.NewFileCache(files),
		Tails: segments.NewTailCache(segments.DefaultTailBudget, 0), Logger: logger}, nil) // the server's defaults
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if err := br.Reconcile(img); err != nil {
		b.Fatal(err)
	}
	meta := &fakeMeta{img: img, leader: 1}
	k := New(Config{NodeID: 1, Meta: meta, Broker: br, Logger: logger,
		Quotas:  quota.NewNode(func() *raftfsm.Image { return img }, meta.Apply),
		Metrics: metrics.New(prometheus.NewRegistry(), metrics.Node{ID: 1, Meta: meta})})
	s := kafkaproto.NewServer(k, kafkaproto.Options{Logger: logger, MaxRequestSize: 64 << 20})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	defer func() {
		s.Close()
		if err := <-done; err != nil && !errors.Is(err, kafkaproto.ErrServerClosed) {
			b.Errorf("Serve: %v", err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	const producerID = 7
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	request := func(seq int32) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = -1, 600_000
		for _, t := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = t.Name
			for i := range t.Partitions {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(i)
				rp.Records = recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("x"), Timestamp: time.Now().UnixMilli()}})
				recordbatch.SetProducer(rp.Records, producerID, 0, seq)
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return format.AppendRequest(nil, req, seq)
	}
	send := func(frame []byte) {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			b.Fatal(err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, no header tags
			b.Fatal(err)
		}
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					b.Fatalf("%s-%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
				}
				n++
			}
		}
		if n != parts {
			b.Fatalf("%d partitions answered, want %d", n, parts)
		}
	}
	send(request(0)) // every log created and written once
	if path := os.Getenv("RUNNEL_BENCH_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var elapsed, sys, cpu time.Duration
	for seq := int32(1); b.Loop(); seq++ {
		b.StopTimer()
		frame := request(seq)
		b.StartTimer()
		sys0, cpu0 := cpuTime(b)
		start := time.Now()
		send(frame)
		elapsed += time.Since(start)
		sys1, cpu1 := cpuTime(b)
		sys, cpu = sys+sys1-sys0, cpu+cpu1-cpu0
	}
	n := float64(b.N * parts)
	b.ReportMetric(float64(elapsed.Microseconds())/n, "us/partition")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-us/partition")
	b.ReportMetric(float64(sys.Microseconds())/n, "sys-us/partition")
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/request")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's kernel CPU time and its whole CPU time (user
// and kernel) so far.
func cpuTime(b *testing.B) (sys, all time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Stime.Nano()), time.Duration(ru.Stime.Nano() + ru.Utime.Nano())
}
