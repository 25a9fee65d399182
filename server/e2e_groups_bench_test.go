package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkGroupCommit measures synchronous offset commits of one franz-go
// group member (six partitions per commit, appended acks=all to
// __consumer_offsets) against a runnel node and, in the same run, against
// franz-go's in-memory fake cluster (kfake) as the reference. Metrics:
// commits/s for runnel, kfake-commits/s and ratio (runnel/kfake). Needs
// RUNNEL_BENCH=1 (it starts a server).
func BenchmarkGroupCommit(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	node := servertest.Start(b, servertest.Options{})
	runs := 0
	b.Run("partitions=6", func(b *testing.B) {
		runs++
		topic := fmt.Sprintf("bench-commit-%d", runs)
		runnelTopic(b, node, topic, 6)
		fake := kfakeCluster(b, topic, 6)
		const perOp = 500
		b.ResetTimer()
		var runnel time.Duration
		for range b.N {
			runnel += benchCommits(b, node.KafkaAddr, topic, fmt.Sprintf("g-%d", runs), perOp)
		}
		b.StopTimer()
		var ref time.Duration
		for range b.N {
			ref += benchCommits(b, fake.ListenAddrs()[0], topic, fmt.Sprintf("g-%d", runs), perOp)
		}
		rate, refRate := float64(b.N*perOp)/runnel.Seconds(), float64(b.N*perOp)/ref.Seconds()
		b.ReportMetric(rate, "commits/s")
		b.ReportMetric(refRate, "kfake-commits/s")
		b.ReportMetric(rate/refRate, "ratio")
	})
	b.Run("consume/group-vs-plain", func(b *testing.B) {
		runs++
		const total = 50_000
		topic := fmt.Sprintf("bench-group-consume-%d", runs)
		runnelTopic(b, node, topic, 6)
		benchProduce(b, node.KafkaAddr, topic, total, make([]byte, 1024))
		b.ResetTimer()
		var join, group, plainFirst, plain time.Duration
		for i := range b.N {
			j, r := benchFirstAndRest(b, node.KafkaAddr, topic, total, kgo.ConsumerGroup(fmt.Sprintf("consume-%d-%d", runs, i)))
			join, group = join+j, group+r
		}
		b.StopTimer()
		for range b.N {
			f, r := benchFirstAndRest(b, node.KafkaAddr, topic, total)
			plainFirst, plain = plainFirst+f, plain+r
		}
		b.ReportMetric(float64(join.Milliseconds())/float64(b.N), "group-first-record-ms")
		b.ReportMetric(float64(plainFirst.Milliseconds())/float64(b.N), "plain-first-record-ms")
		b.ReportMetric(plain.Seconds()/group.Seconds(), "read-ratio")
	})
}

// benchCommits joins group as its only member and commits n times.
func benchCommits(b *testing.B, addr, topic, group string, n int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for { // wait to be in the group
		if _, gen := cl.GroupMetadata(); gen > 0 {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollRecords(pctx, 1)
		pcancel()
		if ctx.Err() != nil {
			b.Fatal("never joined")
		}
	}
	start := time.Now()
	for i := range n {
		offs := map[string]map[int32]kgo.EpochOffset{topic: {}}
		for p := range int32(6) {
			offs[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: int64(i)}
		}
		var cerr error
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = err
					}
				}
			}
		})
		if cerr != nil {
			b.Fatal(cerr)
		}
	}
	return time.Since(start)
}

// benchFirstAndRest reads n records from the start of topic with a new
// client (in a group with kgo.ConsumerGroup, committing as franz-go does by
// default) and returns the time to the first records (joining the group,
// for a member) and the time to read the rest.
func benchFirstAndRest(b *testing.B, addr, topic string, n int, opts ...kgo.Opt) (time.Duration, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var first time.Duration
	var rest time.Time
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, p int32, err error) { b.Fatalf("fetch %d: %v", p, err) })
		if got == 0 && fs.NumRecords() > 0 {
			first, rest = time.Since(start), time.Now()
		}
		got += fs.NumRecords()
	}
	return first, time.Since(rest)
}

// BenchmarkGroupHTTPPoll reads a one-partition topic over HTTP as a group
// member (join, then polls of 1000 records, committing after each) and, in
// the same run, with plain partition reads of 1000 records as the
// reference. Metrics: join-ms (the join of a new group, initial rebalance
// delay included), member-records/s and plain-records/s (reading only),
// ratio (member/plain). Needs RUNNEL_BENCH=1.
func BenchmarkGroupHTTPPoll(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	node := servertest.Start(b, servertest.Options{})
	const total = 20_000
	runnelTopic(b, node, "bench-http-poll", 1)
	benchProduce(b, node.KafkaAddr, "bench-http-poll", total, make([]byte, 256))
	c := newAPIClient(b, node)
	b.ResetTimer()
	var joins, member, plain time.Duration
	for i := range b.N {
		start := time.Now()
		var join api.GroupMembership
		c.json(http.MethodPost, fmt.Sprintf("/v1/groups/bench-%d/members", i), map[string]any{"topics": []string{"bench-http-poll"}}, http.StatusOK, &join)
		joins += time.Since(start)
		start = time.Now()
		path := fmt.Sprintf("/v1/groups/bench-%d/members/%s", i, url.PathEscape(join.MemberID))
		for got := 0; got < total; {
			var res client.GroupPollResponse
			c.json(http.MethodGet, path+"/records?max_records=1000&encoding=base64", nil, http.StatusOK, &res)
			got += len(res.Records)
			c.json(http.MethodPost, path+"/offsets", nil, http.StatusOK, nil)
		}
		member += time.Since(start)
	}
	b.StopTimer()
	for range b.N {
		start := time.Now()
		for next := 0; next < total; {
			var res consumePage
			c.json(http.MethodGet, fmt.Sprintf("/v1/topics/bench-http-poll/partitions/0/records?offset=%d&max_records=1000&encoding=base64", next), nil, http.StatusOK, &res)
			next = int(res.NextOffset)
		}
		plain += time.Since(start)
	}
	rate, ref := float64(b.N*total)/member.Seconds(), float64(b.N*total)/plain.Seconds()
	b.ReportMetric(float64(joins.Milliseconds())/float64(b.N), "join-ms")
	b.ReportMetric(rate, "member-records/s")
	b.ReportMetric(ref, "plain-records/s")
	b.ReportMetric(rate/ref, "ratio")
}
