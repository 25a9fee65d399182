package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkKafkaProduceValidation measures franz-go produce throughput
// (1 KiB JSON-like records, which compress about 3x) against a node that
// validates every record of every batch (the default) and, in the same run,
// against a node started with --bench-skip-record-validation, which appends
// as runnel did before record validation (uncompressed records framed,
// compressed batches not inflated). Both nodes run at once and are measured
// alternately, so drift on the shared machine hits both. Metrics:
// records/s, baseline-records/s and ratio (validated/baseline) per codec.
// Needs RUNNEL_BENCH=1 (it starts two servers).
func BenchmarkKafkaProduceValidation(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	validated := servertest.Start(b, servertest.Options{})
	baseline := servertest.Start(b, servertest.Options{Args: []string{"--bench-skip-record-validation"}})
	values := jsonValues(256, 1024)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
		{"snappy", kgo.SnappyCompression()}, {"gzip", kgo.GzipCompression()},
	}
	runs := 0
	for _, c := range codecs {
		b.Run("codec="+c.name, func(b *testing.B) {
			runs++
			const perOp = 20_000
			topic := fmt.Sprintf("bench-validate-%s-%d", c.name, runs)
			runnelTopic(b, validated, topic, 1)
			runnelTopic(b, baseline, topic, 1)
			b.SetBytes(perOp * 1024)
			b.ResetTimer()
			var v, base time.Duration
			for i := range b.N {
				if i%2 == 0 {
					v += produceWith(b, validated.KafkaAddr, topic, perOp, values, c.codec)
					base += produceWith(b, baseline.KafkaAddr, topic, perOp, values, c.codec)
				} else {
					base += produceWith(b, baseline.KafkaAddr, topic, perOp, values, c.codec)
					v += produceWith(b, validated.KafkaAddr, topic, perOp, values, c.codec)
				}
			}
			b.StopTimer()
			rate := float64(b.N*perOp) / v.Seconds()
			baseRate := float64(b.N*perOp) / base.Seconds()
			b.ReportMetric(rate, "records/s")
			b.ReportMetric(baseRate, "baseline-records/s")
			b.ReportMetric(rate/baseRate, "ratio")
		})
	}
}

// jsonValues returns n distinct JSON-like values of size bytes.
func jsonValues(n, size int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, n)
	for i := range out {
		v := []byte(fmt.Sprintf(`{"id":%d,"user":"user-%d","items":[`, r.IntN(1e9), r.IntN(1e5)))
		for len(v) < size-40 {
			v = fmt.Appendf(v, `{"sku":"SKU-%05d","qty":%d,"price":%d.%02d},`, r.IntN(1e5), r.IntN(9)+1, r.IntN(500), r.IntN(100))
		}
		v = append(v, `{}],"ok":true}`...)
		for len(v) < size {
			v = append(v, ' ')
		}
		out[i] = v[:size]
	}
	return out
}

// produceWith produces n records with codec and returns how long producing
// and flushing took.
func produceWith(b *testing.B, addr, topic string, n int, values [][]byte, codec kgo.CompressionCodec) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.SliceRecord(values[0])).FirstErr(); err != nil { // warm up
		b.Fatal(err)
	}
	start := time.Now()
	failed := make(chan error, 1)
	for i := range n - 1 {
		cl.Produce(ctx, kgo.SliceRecord(values[i%len(values)]), func(_ *kgo.Record, err error) {
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
