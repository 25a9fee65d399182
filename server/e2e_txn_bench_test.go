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

// BenchmarkKafkaTransactions measures transactional produce (franz-go, one
// transaction per 1,000 records of 1 KiB, committed) against idempotent
// produce (franz-go's default) to the same node, measured alternately in
// the same run. Metrics: txn-records/s, idempotent-records/s and ratio
// (transactional / idempotent). Needs RUNNEL_BENCH=1 (it starts a server).
func BenchmarkKafkaTransactions(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	node := servertest.Start(b, servertest.Options{})
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	const perOp, perTxn = 20_000, 1_000
	runs := 0 // the framework calls each sub-benchmark more than once
	for _, parts := range []int32{1, 3} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			runs++
			topic := fmt.Sprintf("bench-txn-%d-%d", parts, runs)
			runnelTopic(b, node, topic, parts)
			b.SetBytes(perOp * int64(len(value)))
			var txn, idem time.Duration
			for i := range b.N {
				txn += benchTxnProduce(b, node.KafkaAddr, topic, fmt.Sprintf("bench-%d-%d-%d", parts, runs, i), perOp, perTxn, value)
				idem += benchProduce(b, node.KafkaAddr, topic, perOp, value)
			}
			txnRate := float64(b.N*perOp) / txn.Seconds()
			idemRate := float64(b.N*perOp) / idem.Seconds()
			b.ReportMetric(txnRate, "txn-records/s")
			b.ReportMetric(idemRate, "idempotent-records/s")
			b.ReportMetric(txnRate/idemRate, "ratio")
		})
	}
}

// benchTxnProduce produces n records in committed transactions of perTxn
// records and returns how long it took (after a warm-up transaction).
func benchTxnProduce(b *testing.B, addr, topic, txnID string, n, perTxn int, value []byte) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	txn := func(records int) {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for range records {
			cl.Produce(ctx, kgo.SliceRecord(value), func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	txn(1) // warm up: coordinator, producer id, metadata
	start := time.Now()
	for done := 0; done < n; done += perTxn {
		txn(min(perTxn, n-done))
	}
	return time.Since(start)
}
