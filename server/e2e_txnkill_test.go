package server_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/server/servertest"
)

// TestTxnExactlyOnceAcrossKills: a consume-transform-produce pipeline
// (franz-go GroupTransactSession) over 3 nodes while the broker coordinating
// its transactional id, and then the leader of an output partition on
// another broker, are killed with -9 and restarted: the output, read with
// read_committed, holds every input record exactly once. (RUNNEL_CHAOS:
// 60,000 records, four kills.)
func TestTxnExactlyOnceAcrossKills(t *testing.T) {
	// Kills alternate: the transaction coordinator's broker, then the
	// leader of an output partition on another broker.
	records, kills := 3_000, 2
	if os.Getenv("RUNNEL_CHAOS") != "" {
		records, kills = 60_000, 4
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	keepLogsOnFailure(t, c)
	seeds := []string{c.Node(1).KafkaAddr, c.Node(2).KafkaAddr, c.Node(3).KafkaAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for _, topic := range []string{"eos-in", "eos-out"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("eos-in"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce input: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	const txnID = "eos-pipeline"
	// franz-go says no error from End is retryable: an application restarts
	// its session (a new one fences the old epoch). The pipeline does the
	// same, so a kill that lands on the group or transaction coordinator at
	// the wrong moment costs a restart, and exactly-once must still hold.
	var kgoLog []kgo.Opt
	if path := os.Getenv("RUNNEL_CHAOS_KGO_LOG"); path != "" {
		// What the pipeline's client saw, to tell its waits from the cluster's.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		kgoLog = append(kgoLog, kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	newSession := func() (*kgo.GroupTransactSession, error) {
		return kgo.NewGroupTransactSession(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(60 * time.Second), kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("eos-in"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic("eos-out"), kgo.SessionTimeout(10 * time.Second)}, kgoLog...)...)
	}
	sess, err := newSession()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { sess.Close() }() // the last session: the pipeline may replace it
	restarts := 0
	restart := func(what string, cause error) bool {
		t.Logf("%s: %v; restarting the session", what, cause)
		sess.Close()
		var err error
		if sess, err = newSession(); err != nil {
			t.Errorf("new session: %v", err)
			return false
		}
		restarts++
		return true
	}

	// The pipeline: every committed poll's records moved to eos-out.
	// The pipeline starts no transaction past allowed, which the test raises
	// phase by phase, so every kill lands while transactions are running.
	var mu sync.Mutex
	committed, allowed := 0, records/(kills+2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			mu.Lock()
			finished, held := committed >= records, committed >= allowed
			mu.Unlock()
			if finished {
				return
			}
			if held {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := sess.PollRecords(pctx, 50) // many small transactions
			pcancel()
			if fs.Empty() {
				continue
			}
			if err := sess.Begin(); err != nil {
				if !restart("begin", err) {
					return
				}
				continue
			}
			n := 0
			fs.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
			})
			ok, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				if !restart("end", err) {
					return
				}
				continue
			}
			if ok {
				mu.Lock()
				committed += n
				mu.Unlock()
			}
		}
	}()
	progress := func(min int) {
		servertest.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d records through the pipeline", min), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return committed >= min
		})
	}
	for k := range kills {
		progress(records * (k + 1) / (kills + 2))
		mu.Lock()
		allowed = records * (k + 2) / (kills + 2)
		mu.Unlock()
		coord := adm.FindTxnCoordinators(ctx, txnID)[txnID]
		if coord.Err != nil {
			t.Fatal(coord.Err)
		}
		victimID, role := coord.NodeID, "coordinator of "+txnID
		if k%2 == 1 {
			victimID, role = outputLeaderBesides(t, ctx, adm, coord.NodeID)
		}
		victim := c.Node(int(victimID))
		// The pipeline goes on with the coordinator or the partition on
		// another broker, up to target. Finding the victim takes admin
		// requests: the pipeline may have reached allowed meanwhile and
		// stopped there, so allowed is raised to the target (it used to
		// stay below it: a loaded machine then waited out the progress
		// check with the pipeline held, every node up but the victim).
		mu.Lock()
		at := committed
		target := min(records, at+records/(2*(kills+2)))
		allowed = max(allowed, target)
		mu.Unlock()
		t.Logf("kill -9 node %d (%s) after %d records", victimID, role, at)
		victim.Kill()
		progress(target)
		victim.Start()
	}
	mu.Lock()
	allowed = records
	mu.Unlock()
	<-done
	t.Logf("the pipeline restarted its session %d times", restarts)
	if t.Failed() {
		t.FailNow()
	}

	// read_committed: each input exactly once.
	seen := map[string]int{}
	rd, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("eos-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	total := 0
	for total < records {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d output records", total, records)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	extra, ecancel := context.WithTimeout(ctx, 2*time.Second)
	rd.PollFetches(extra).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	ecancel()
	for i := range records {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("input %d appears %d times in the output", i, n)
		}
	}
	if total != records {
		t.Fatalf("output holds %d records for %d inputs", total, records)
	}
}

// outputLeaderBesides returns a broker other than coordinator that leads a
// partition of eos-out, and which partition.
func outputLeaderBesides(t *testing.T, ctx context.Context, adm *kadm.Client, coordinator int32) (int32, string) {
	t.Helper()
	var id int32 = -1
	var role string
	servertest.WaitFor(t, 30*time.Second, "a leader of eos-out besides the coordinator", func() bool {
		md, err := adm.Metadata(ctx, "eos-out")
		if err != nil {
			return false
		}
		for _, p := range md.Topics["eos-out"].Partitions.Sorted() {
			if p.Leader >= 0 && p.Leader != coordinator {
				id, role = p.Leader, fmt.Sprintf("leader of eos-out/%d", p.Partition)
				return true
			}
		}
		return false
	})
	return id, role
}
