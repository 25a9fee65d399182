package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/server/servertest"
)

// Replication costs, measured on a 3-node cluster in one run: produce
// throughput and p99 latency of RF=3 acks=all against RF=1 acks=1 (the
// ratio is the figure to quote), and the unavailability window after a
// leader kill -9.

// benchCluster starts the cluster; without RUNNEL_BENCH=1 (make bench) the
// benchmarks run a small workload, as CI's short benchmark pass does.
func benchCluster(b *testing.B) *servertest.Cluster {
	return servertest.StartCluster(b, servertest.ClusterOptions{Combined: 3, Args: []string{
		"--broker-heartbeat-interval", "200ms", "--broker-session-timeout", "2s", "--replica-lag-time-max", "5s"}})
}

type produceStats struct {
	recordsPerSec float64
	p99           time.Duration
}

func produceRun(b *testing.B, seeds []string, topic string, acks kgo.Acks, n int) produceStats {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks),
		kgo.ProducerLinger(2 * time.Millisecond)}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	rand.Read(value)
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sent := time.Now()
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			lat[i] = time.Since(sent)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		b.Fatalf("produce to %s: %v", topic, firstErr)
	}
	slices.Sort(lat)
	return produceStats{recordsPerSec: float64(n) / elapsed.Seconds(), p99: lat[n*99/100]}
}

func BenchmarkReplicatedProduce(b *testing.B) {
	c := benchCluster(b)
	for _, spec := range []struct {
		name string
		rf   int
	}{{"rf1", 1}, {"rf3", 3}} {
		if code := createTopic(c.Node(1), spec.name, 3, spec.rf); code != 201 {
			b.Fatalf("create %s: %d", spec.name, code)
		}
	}
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr)
	}
	records := 20000
	if os.Getenv("RUNNEL_BENCH") == "" {
		records = 2000
	}
	b.ResetTimer()
	var one, all produceStats
	for i := 0; i < b.N; i++ {
		one = produceRun(b, seeds, "rf1", kgo.LeaderAck(), records)
		all = produceRun(b, seeds, "rf3", kgo.AllISRAcks(), records)
	}
	b.ReportMetric(one.recordsPerSec, "rf1_acks1_records/s")
	b.ReportMetric(all.recordsPerSec, "rf3_acksall_records/s")
	b.ReportMetric(all.recordsPerSec/one.recordsPerSec, "throughput_ratio")
	b.ReportMetric(float64(one.p99.Microseconds())/1000, "rf1_p99_ms")
	b.ReportMetric(float64(all.p99.Microseconds())/1000, "rf3_p99_ms")
}

// BenchmarkLeaderFailover kills the leader of an RF=3 partition once per
// iteration and measures the time until a write is acknowledged again.
func BenchmarkLeaderFailover(b *testing.B) {
	c := benchCluster(b)
	if code := createTopic(c.Node(1), "failover", 1, 3); code != 201 {
		b.Fatalf("create: %d", code)
	}
	kills := 10
	if os.Getenv("RUNNEL_BENCH") == "" {
		kills = 2
	}
	var windows []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < kills; k++ {
			var leader int32
			servertest.WaitFor(b, 60*time.Second, "a leader with a full ISR", func() bool {
				ps, ok := describe(c.Node(1+k%3), "failover")
				if ok && len(ps) == 1 && len(ps[0].ISR) == 3 && ps[0].Leader > 0 {
					leader = ps[0].Leader
					return true
				}
				return false
			})
			victim := c.Node(int(leader))
			survivor := c.Node(int(leader)%3 + 1)
			killed := time.Now()
			victim.Kill()
			servertest.WaitFor(b, 60*time.Second, "an acknowledged write", func() bool {
				_, ok := produceOne(survivor, "failover", "probe", 2*time.Second)
				return ok
			})
			windows = append(windows, time.Since(killed))
			victim.Start()
		}
	}
	b.StopTimer()
	slices.Sort(windows)
	b.ReportMetric(float64(windows[len(windows)/2].Milliseconds()), "median_unavailable_ms")
	b.ReportMetric(float64(windows[len(windows)-1].Milliseconds()), "worst_unavailable_ms")
}
