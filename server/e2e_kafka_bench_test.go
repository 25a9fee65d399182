package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkKafkaFranzGo measures franz-go producer and consumer throughput
// with 1 KiB records against a runnel node and, in the same run, against
// franz-go's in-memory fake cluster (kfake) as the reference. Metrics:
// records/s and MB/s for runnel, kfake-records/s, and ratio (runnel/kfake).
// Needs RUNNEL_BENCH=1 (it starts a server).
func BenchmarkKafkaFranzGo(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	node := servertest.Start(b, servertest.Options{})
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rand.Uint32()) // incompressible, as snappy is on by default
	}
	runs := 0 // the framework calls each sub-benchmark more than once
	for _, parts := range []int32{1, 8} {
		b.Run(fmt.Sprintf("produce/partitions=%d", parts), func(b *testing.B) {
			runs++
			const perOp = 20_000
			topic := fmt.Sprintf("bench-produce-%d-%d", parts, runs)
			runnelTopic(b, node, topic, parts)
			fake := kfakeCluster(b, topic, parts)
			b.SetBytes(perOp * int64(len(value)))
			b.ResetTimer()
			var runnel time.Duration
			for range b.N {
				runnel += benchProduce(b, node.KafkaAddr, topic, perOp, value)
			}
			b.StopTimer()
			var ref time.Duration
			for range b.N {
				ref += benchProduce(b, fake.ListenAddrs()[0], topic, perOp, value)
			}
			reportRatio(b, b.N*perOp, runnel, ref)
		})
		b.Run(fmt.Sprintf("consume/partitions=%d", parts), func(b *testing.B) {
			runs++
			const total = 50_000
			topic := fmt.Sprintf("bench-consume-%d-%d", parts, runs)
			runnelTopic(b, node, topic, parts)
			fake := kfakeCluster(b, topic, parts)
			benchProduce(b, node.KafkaAddr, topic, total, value)
			benchProduce(b, fake.ListenAddrs()[0], topic, total, value)
			b.SetBytes(total * int64(len(value)))
			b.ResetTimer()
			var runnel time.Duration
			for range b.N {
				runnel += benchConsume(b, node.KafkaAddr, topic, total)
			}
			b.StopTimer()
			var ref time.Duration
			for range b.N {
				ref += benchConsume(b, fake.ListenAddrs()[0], topic, total)
			}
			reportRatio(b, b.N*total, runnel, ref)
		})
	}
}

func runnelTopic(b *testing.B, node *servertest.Node, topic string, parts int32) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(context.Background(), b, cl, topic, parts)
}

func kfakeCluster(b *testing.B, topic string, parts int32) *kfake.Cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

func reportRatio(b *testing.B, records int, runnel, ref time.Duration) {
	rate := float64(records) / runnel.Seconds()
	refRate := float64(records) / ref.Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(refRate, "kfake-records/s")
	b.ReportMetric(rate/refRate, "ratio")
}

// benchProduce produces n records with franz-go's defaults and returns how
// long producing and flushing took.
func benchProduce(b *testing.B, addr, topic string, n int, value []byte, opts ...kgo.Opt) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.SliceRecord(value)).FirstErr(); err != nil { // warm up: metadata, producer id
		b.Fatal(err)
	}
	start := time.Now()
	failed := make(chan error, 1)
	for range n - 1 {
		cl.Produce(ctx, kgo.SliceRecord(value), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-failed:
		b.Fatal(err)
	default:
	}
	return time.Since(start)
}

// benchConsume reads n records from the start of topic with a new client.
func benchConsume(b *testing.B, addr, topic string, n int, opts ...kgo.Opt) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, p int32, err error) { b.Fatalf("fetch %d: %v", p, err) })
		got += fs.NumRecords()
	}
	return time.Since(start)
}
