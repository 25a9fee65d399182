package kafkaproto

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkListener measures the listener alone: franz-go producing and
// consuming 1 KiB records through kafkaproto backed by the in-memory test
// broker, against kfake in the same run (metric ratio = listener/kfake).
// The end-to-end figures against a real runnel are BenchmarkKafkaFranzGo in
// package server.
func BenchmarkListener(b *testing.B) {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	for _, parts := range []int32{1, 8} {
		b.Run(fmt.Sprintf("produce/partitions=%d", parts), func(b *testing.B) {
			const perOp = 20_000
			mb := newMemBroker()
			addr, _ := startServer(b, mb, Options{})
			mustCreate(b, mb, "bench", parts)
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer fake.Close()
			b.SetBytes(perOp * int64(len(value)))
			b.ResetTimer()
			var ours, ref time.Duration
			for range b.N {
				ours += produceRecords(b, addr, perOp, value)
			}
			b.StopTimer()
			for range b.N {
				ref += produceRecords(b, fake.ListenAddrs()[0], perOp, value)
			}
			b.ReportMetric(float64(b.N*perOp)/ours.Seconds(), "records/s")
			b.ReportMetric(ref.Seconds()/ours.Seconds(), "ratio")
		})
	}
}

func produceRecords(b *testing.B, addr string, n int, value []byte) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.SliceRecord(value)).FirstErr(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range n {
		cl.Produce(ctx, kgo.SliceRecord(value), nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}
