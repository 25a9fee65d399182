package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkMetadataAllTopics (issue 19: "Kafka Metadata for all topics works
// at 1 M partitions"): one node with many RF-1 partitions (topics of up to
// 1,000, created over HTTP by 4 clients), then a franz-go client asks
// Metadata for every topic (Topics nil, v12) three times: the response's
// size, the time of the first answer (the node converts its metadata image
// for the Kafka listener once per image) and of the later ones, and the
// node's RSS before and after. A Metadata response is one frame, as in
// Kafka; the client is allowed 1 GiB (franz-go's default is 100 MiB).
//
// Sizes: RUNNEL_BENCH_PARTITIONS, else 100,000 under RUNNEL_BENCH=1, else
// 20,000 (make bench-short).
func BenchmarkMetadataAllTopics(b *testing.B) {
	partitions := 20_000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		partitions = 100_000
	}
	partitions = benchPartitions(b, partitions)
	perTopic := min(partitions, 1000)
	topics := partitions / perTopic
	limit := strconv.Itoa(partitions + 1000)
	node := servertest.Start(b, servertest.Options{Args: []string{
		"--max-partitions", limit, "--max-broker-partitions", limit,
	}})
	client := keepAliveClient(b, 4)
	create := timed(func() {
		parallel(b, topics, 4, func(i int) {
			scalePost(b, client, node.URL+"/v1/topics", fmt.Sprintf(`{"name":"md-%05d","partitions":%d}`, i, perTopic), http.StatusCreated)
		})
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr), kgo.BrokerMaxReadBytes(1<<30), kgo.RequestTimeoutOverhead(5*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ask := func() (time.Duration, int, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		took := time.Since(start)
		if err != nil {
			b.Fatalf("Metadata for all topics: %v", err)
		}
		n := 0
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		return took, len(resp.AppendTo(nil)), n
	}
	rssBefore, _ := node.RSS()
	first, size, got := ask()
	rssFirst, _ := node.RSS()
	var later time.Duration
	for range 2 {
		took, _, _ := ask()
		later += took / 2
	}
	rssAfter, _ := node.RSS()
	if got < partitions {
		b.Fatalf("Metadata listed %d partitions, want at least %d", got, partitions)
	}
	b.ReportMetric(float64(partitions), "partitions")
	b.ReportMetric(create.Seconds(), "create-s")
	b.ReportMetric(float64(size)/(1<<20), "response-MiB")
	b.ReportMetric(float64(size)/float64(got), "response-B/partition")
	b.ReportMetric(first.Seconds(), "first-s")
	b.ReportMetric(later.Seconds(), "later-s")
	b.ReportMetric(float64(rssBefore)/(1<<20), "rss-before-MiB")
	b.ReportMetric(float64(rssFirst-rssBefore)/(1<<20), "rss-growth-first-MiB")
	b.ReportMetric(float64(rssAfter-rssBefore)/(1<<20), "rss-growth-after-3-MiB")
}
