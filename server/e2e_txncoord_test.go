package server_test

// Transactions over the Kafka listener (issue 16, coordinator side): a
// franz-go transactional producer and GroupTransactSession against a real
// runnel process.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnProduce produces n records with values prefix-i in the open
// transaction of cl and flushes.
func txnProduce(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(prefix + "-" + strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// readTxnTopic reads topic from the start until n records came, with the given
// isolation level, and returns their values.
func readTxnTopic(ctx context.Context, t *testing.T, addr, topic string, iso kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v (%q)", len(out), n, ctx.Err(), out)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

func TestTxnProducerCommitAbortFence(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "txn-out"
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.TransactionalID("tx-1"),
		kgo.TransactionTimeout(30*time.Second), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, topic, 2)

	start := time.Now()
	for i, commit := range []bool{true, false, true} {
		t.Logf("%v: transaction %d", time.Since(start), i)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		txnProduce(ctx, t, cl, topic, fmt.Sprintf("t%d", i), 10)
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", i, commit, err)
		}
	}

	adm := kadm.NewClient(cl)
	described, err := adm.DescribeTransactions(ctx, "tx-1")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described["tx-1"]
	if !ok || d.Err != nil || d.State != "CompleteCommit" || d.ProducerID < 0 {
		t.Fatalf("DescribeTransactions: %+v", described)
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["tx-1"]; !ok {
		t.Fatalf("ListTransactions: %+v", listed)
	}

	// A second producer with the same id fences the first: its next
	// transaction cannot commit.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(ctx, t, cl, topic, "zombie", 1)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.TransactionalID("tx-1"),
		kgo.TransactionTimeout(30*time.Second), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if err := cl2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(ctx, t, cl2, topic, "t3", 5) // InitProducerId: bumps the epoch
	err = cl.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie commit: %v, want PRODUCER_FENCED", err)
	}
	if err := cl2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := readTxnTopic(ctx, t, n.KafkaAddr, topic, kgo.ReadCommitted(), 25)
	t.Logf("read_committed: %d records", len(got))
	if testing.Verbose() {
		t.Log(n.Logs())
	}
}
