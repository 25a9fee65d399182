package server_test

// Transactions over the Kafka listener (issue 16, coordinator side): a
// franz-go transactional producer and GroupTransactSession against a real
// runnel process.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
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

// readTxnTopic reads topic from the start until n records came (and
// whatever else comes within a second), with the given isolation level,
// and returns their values.
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
	// Anything beyond n (records that should not be visible) shows up in
	// one more short poll; the callers compare the count.
	extra, cancelExtra := context.WithTimeout(ctx, time.Second)
	defer cancelExtra()
	cl.PollFetches(extra).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
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

	for i, commit := range []bool{true, false, true} {
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
	// read_committed: the committed transactions only (t0, t2, t3);
	// read_uncommitted: every record, the aborted t1 and zombie too.
	committed := readTxnTopic(ctx, t, n.KafkaAddr, topic, kgo.ReadCommitted(), 25)
	counts := map[string]int{}
	for _, v := range committed {
		counts[strings.SplitN(v, "-", 2)[0]]++
	}
	if len(committed) != 25 || counts["t0"] != 10 || counts["t2"] != 10 || counts["t3"] != 5 {
		t.Fatalf("read_committed read %d records: %v", len(committed), counts)
	}
	if all := readTxnTopic(ctx, t, n.KafkaAddr, topic, kgo.ReadUncommitted(), 36); len(all) != 36 {
		t.Fatalf("read_uncommitted read %d records, want 36", len(all))
	}
}

// TestTxnOffsetCommitVisibleAtCommit drives the offset side of a
// transaction with raw requests: offsets a TxnOffsetCommit staged are not
// the group's until the transaction commits (OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT meanwhile), and an aborted
// transaction's offsets never are.
func TestTxnOffsetCommitVisibleAtCommit(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, "in", 1)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("etl"), 30000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	fetch := func(stable bool) (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = stable
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "etl-group"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "in", []int32{0}
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, kerr.ErrorForCode(p.ErrorCode)
	}
	for round, commit := range []bool{false, true} {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "etl", ir.ProducerID, ir.ProducerEpoch, "etl-group"
		if ar, err := add.RequestWith(ctx, cl); err != nil || ar.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(ar.ErrorCode))
		}
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = "etl", "etl-group", ir.ProducerID, ir.ProducerEpoch, -1
		ot := kmsg.NewTxnOffsetCommitRequestTopic()
		ot.Topic = "in"
		op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset, op.LeaderEpoch = 0, int64(100+round), -1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		if or, err := oc.RequestWith(ctx, cl); err != nil || or.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, or)
		}
		if _, err := fetch(true); !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Fatalf("round %d: stable fetch during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", round, err)
		}
		want := int64(-1) // nothing committed yet in round 0
		if off, err := fetch(false); err != nil || off != want && round == 0 {
			t.Fatalf("round %d: fetch during the transaction: %d %v, want %d", round, off, err, want)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "etl", ir.ProducerID, ir.ProducerEpoch, commit
		if er, err := end.RequestWith(ctx, cl); err != nil || er.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v %v", err, kerr.ErrorForCode(er.ErrorCode))
		}
		off, err := fetch(true)
		if commit {
			want = 101
		}
		if err != nil || off != want {
			t.Fatalf("round %d (commit %v): offset %d %v, want %d", round, commit, off, err, want)
		}
	}
}

// TestTxnSaramaProducer: sarama's transactional producer (a second client
// library) commits and aborts transactions against runnel.
func TestTxnSaramaProducer(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, "sarama-txn", 2)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = "sarama-tx"
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.AllowAutoTopicCreation = false
	p, err := sarama.NewSyncProducer([]string{n.KafkaAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		for j := range 5 {
			msg := &sarama.ProducerMessage{Topic: "sarama-txn", Value: sarama.StringEncoder(fmt.Sprintf("s%d-%d", i, j))}
			if _, _, err := p.SendMessage(msg); err != nil {
				t.Fatalf("send %d/%d: %v", i, j, err)
			}
		}
		if commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatalf("end %d (commit %v): %v", i, commit, err)
		}
	}
	d, err := kadm.NewClient(cl).DescribeTransactions(ctx, "sarama-tx")
	if err != nil {
		t.Fatal(err)
	}
	if s := d["sarama-tx"]; s.Err != nil || s.State != "CompleteCommit" {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
}

// TestTxnAcrossBrokers: on 3 nodes the transaction coordinator, the
// partitions' leaders and the group's coordinator are different brokers;
// markers reach them over the inter-broker port (WriteTxnMarkers), so every
// partition gets one control batch per transaction and the group gets the
// committed transaction's offsets.
func TestTxnAcrossBrokers(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seeds := []string{c.Node(1).KafkaAddr, c.Node(2).KafkaAddr, c.Node(3).KafkaAddr}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	// A transactional id and a group coordinated by different brokers.
	txnCoord := func(id string) int32 {
		r := adm.FindTxnCoordinators(ctx, id)
		if r[id].Err != nil {
			t.Fatalf("FindCoordinator(txn %s): %+v", id, r)
		}
		return r[id].NodeID
	}
	groupCoord := func(g string) int32 {
		r := adm.FindGroupCoordinators(ctx, g)
		if r[g].Err != nil {
			t.Fatalf("FindCoordinator(group %s): %+v", g, r)
		}
		return r[g].NodeID
	}
	txnID, group := "cross", ""
	tc := txnCoord(txnID)
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("g%d", i); groupCoord(g) != tc {
			group = g
		}
		if i > 100 {
			t.Fatal("every group is coordinated by the transaction coordinator")
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(30*time.Second), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	perPartition := map[int32]int64{}
	markers := map[int32]int64{}
	for round, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		touched := map[int32]bool{}
		for i := range 30 {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%d-%d", round, i))}).First()
			if err != nil {
				t.Fatal(err)
			}
			perPartition[r.Partition]++
			touched[r.Partition] = true
		}
		for p := range touched {
			markers[p]++
		}
		if commit {
			// The offsets of this transaction go to the group's coordinator.
			pid, epoch, err := cl.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			add := kmsg.NewPtrAddOffsetsToTxnRequest()
			add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
			if ar, err := add.RequestWith(ctx, cl); err != nil || ar.ErrorCode != 0 {
				t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(ar.ErrorCode))
			}
			oc := kmsg.NewPtrTxnOffsetCommitRequest()
			oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = txnID, group, pid, epoch, -1
			ot := kmsg.NewTxnOffsetCommitRequestTopic()
			ot.Topic = "spread"
			op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch = 0, 42, -1
			ot.Partitions = append(ot.Partitions, op)
			oc.Topics = append(oc.Topics, ot)
			if or, err := oc.RequestWith(ctx, cl); err != nil || or.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("TxnOffsetCommit: %v %+v", err, or)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", round, err)
		}
	}
	servertest.WaitFor(t, 30*time.Second, "the transaction completed", func() bool {
		d, err := adm.DescribeTransactions(ctx, txnID)
		return err == nil && d[txnID].State == "CompleteAbort"
	})
	for p := int32(0); p < 6; p++ {
		got := int64(0) // from the leader: the node hosting the partition (RF 1)
		for _, node := range c.Nodes {
			got = max(got, httpEndOffset(t, node, "spread", int(p)))
		}
		if want := perPartition[p] + markers[p]; got != want {
			t.Errorf("partition %d: end offset %d, want %d records + %d markers", p, got, perPartition[p], markers[p])
		}
	}
	// GET /v1/transactions on any node gathers every coordinator's ids.
	for i, node := range c.Nodes {
		var list api.TransactionList
		newAPIClient(t, node).json("GET", "/v1/transactions", nil, 200, &list)
		if len(list.Transactions) != 1 || list.Transactions[0].TransactionalID != txnID || list.Transactions[0].State != "CompleteAbort" ||
			list.Transactions[0].Coordinator != tc {
			t.Fatalf("GET /v1/transactions on node %d: %+v (coordinator %d)", i+1, list, tc)
		}
	}
	newAPIClient(t, c.Node(2)).problem("GET", "/v1/transactions?state=Nope", "", nil, 400, "invalid-request")
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("spread", 0); !ok || o.At != 42 {
		t.Fatalf("group %s (coordinator %d, transactions on %d): offset %+v", group, groupCoord(group), tc, o)
	}
}

// TestTxnCommitAfterTopicDeleted: a topic deleted while a transaction had
// written to it does not keep the transaction preparing forever (its
// marker is skipped, as Kafka does); the other partitions get theirs.
func TestTxnCommitAfterTopicDeleted(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.TransactionalID("tx-del"), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, "keep", 1)
	kafkaCreateTopic(ctx, t, cl, "gone", 1)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	txnProduce(ctx, t, cl, "keep", "k", 3)
	txnProduce(ctx, t, cl, "gone", "g", 3)
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 30*time.Second, "the transaction completed", func() bool {
		d, err := adm.DescribeTransactions(ctx, "tx-del")
		return err == nil && d["tx-del"].State == "CompleteCommit"
	})
	if got := readTxnTopic(ctx, t, n.KafkaAddr, "keep", kgo.ReadCommitted(), 3); len(got) != 3 {
		t.Fatalf("read_committed of the kept topic: %q", got)
	}
}
