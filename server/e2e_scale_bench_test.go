package server_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkNodeScale measures one node holding many partitions (issue 19):
// creation over the HTTP API (topics of up to 1,000 partitions, 4 clients),
// disk used, RSS after creating them, the clean shutdown (SIGTERM to
// exit), restart to ready after it and after kill -9, RSS after the
// restart, and 1,000 single-record produces to random partitions
// afterwards; then the bulk admin rate,
// one-partition topics created by 4 concurrent clients.
//
// Sizes: RUNNEL_BENCH_PARTITIONS (1,000,000 in make bench-scale), else
// 100,000 under RUNNEL_BENCH=1, else 2,000 (make bench-short: it still runs).
func BenchmarkNodeScale(b *testing.B) {
	partitions, oneTopics := 2000, 200
	if os.Getenv("RUNNEL_BENCH") == "1" {
		partitions, oneTopics = 100_000, 5000
	}
	partitions = benchPartitions(b, partitions)
	perTopic := min(partitions, 1000)
	topics := partitions / perTopic
	limit := strconv.Itoa(2*partitions + 2*oneTopics + 1000)
	node := servertest.Start(b, servertest.Options{Args: []string{
		"--max-partitions", limit, "--max-broker-partitions", limit,
	}})
	client := keepAliveClient(b, 4)
	// One measurement whatever b.N: the node keeps what it created. It takes
	// seconds, so the testing package does not ask for more.
	{
		b.Logf("load average before creating: %s", loadAverage())
		create := timed(func() {
			parallel(b, topics, 4, func(i int) {
				scalePost(b, client, node.URL+"/v1/topics", fmt.Sprintf(`{"name":"scale-%05d","partitions":%d}`, i, perTopic), http.StatusCreated)
			})
		})
		rss, _ := node.RSS()
		disk := diskUsage(b, node.DataDir)

		// A restart's wall time follows the machine's load (others' builds
		// share its 2 cores); the node's own CPU seconds up to ready do not.
		b.Logf("load average before the restarts: %s", loadAverage())
		stop := timed(node.Stop) // SIGTERM to exit
		var cleanCPU, killedCPU float64
		clean := timed(func() { node.StartNoWait(); node.WaitReady(10 * time.Minute); cleanCPU = cpuSeconds(node.PID()) })
		node.Kill()
		killed := timed(func() { node.StartNoWait(); node.WaitReady(10 * time.Minute); killedCPU = cpuSeconds(node.PID()) })
		b.Logf("load average after the restarts: %s", loadAverage())
		rssAfter, _ := node.RSS()

		produce := timed(func() {
			parallel(b, 1000, 4, func(int) {
				t, p := rand.IntN(topics), rand.IntN(perTopic)
				scalePost(b, client, fmt.Sprintf("%s/v1/topics/scale-%05d/records", node.URL, t),
					fmt.Sprintf(`{"records":[{"value":"x","partition":%d}]}`, p), http.StatusOK)
			})
		})
		bulk := timed(func() {
			parallel(b, oneTopics, 4, func(i int) {
				scalePost(b, client, node.URL+"/v1/topics", fmt.Sprintf(`{"name":"one-%05d","partitions":1}`, i), http.StatusCreated)
			})
		})

		b.ReportMetric(float64(partitions), "partitions")
		b.ReportMetric(create.Seconds(), "create-s")
		b.ReportMetric(float64(disk)/(1<<20), "disk-MiB")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(stop.Seconds(), "stop-clean-s")
		b.ReportMetric(clean.Seconds(), "restart-clean-s")
		b.ReportMetric(killed.Seconds(), "restart-kill9-s")
		b.ReportMetric(cleanCPU, "restart-clean-cpu-s")
		b.ReportMetric(killedCPU, "restart-kill9-cpu-s")
		b.ReportMetric(float64(rssAfter)/(1<<20), "rss-after-restart-MiB")
		b.ReportMetric(float64(produce.Milliseconds())/1000, "produce-ms/record")
		b.ReportMetric(float64(oneTopics)/bulk.Seconds(), "one-partition-topics/s")
	}
}

// cpuSeconds is the CPU time (user and system) the process pid used so far,
// from /proc/PID/stat (in clock ticks: 100 per second on Linux); 0 when it
// cannot be read.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ...": utime and stime are the 12th and 13th
	// fields after the command, which may hold spaces and parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// benchPartitions is the partition count a scale benchmark runs with:
// RUNNEL_BENCH_PARTITIONS when set (a whole number, at least 1), else def.
func benchPartitions(b *testing.B, def int) int {
	v := os.Getenv("RUNNEL_BENCH_PARTITIONS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("RUNNEL_BENCH_PARTITIONS=%q", v)
	}
	return n
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// parallel runs f(0..n-1) on workers goroutines.
func parallel(b *testing.B, n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// keepAliveClient is an HTTP client that keeps one idle connection per
// worker, as any client pool does. net/http's default keeps 2 per host: with
// more workers, all but 2 of them would connect anew for every request
// (and leave a socket in TIME_WAIT), and the benchmark would measure the
// client's connection churn rather than the node.
func keepAliveClient(b *testing.B, workers int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func scalePost(b *testing.B, client *http.Client, url, body string, want int) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Errorf("POST %s: %v", url, err)
		return
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Errorf("POST %s: %d %s", url, resp.StatusCode, data)
	}
}

// diskUsage is the space the files under dir take on disk (allocated
// blocks, so sparse files count what they use).
func diskUsage(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatalf("disk usage of %s: %v", dir, err)
	}
	return total
}

// BenchmarkTopicCreateRate: one-partition topics created on one node
// (issue 19's bulk admin writes), reported as topics/s: over HTTP by 1, 4
// and 16 concurrent clients (one topic per request), and over Kafka with
// franz-go's kadm, in CreateTopics requests of up to 1,000 topics sent one
// at a time ("kafka-one-request") and by 4 clients at once
// ("kafka-clients=4"). RUNNEL_BENCH=1 creates 5,000 per case, else 400.
// RUNNEL_BENCH_CASES, a comma-separated list of case names, runs only those.
func BenchmarkTopicCreateRate(b *testing.B) {
	n := 400
	if os.Getenv("RUNNEL_BENCH") == "1" {
		n = 5000
	}
	node := servertest.Start(b, servertest.Options{Args: []string{"--pprof"}})
	run := func(name string, create func(round int)) {
		if cases := os.Getenv("RUNNEL_BENCH_CASES"); cases != "" && !slices.Contains(strings.Split(cases, ","), name) {
			return
		}
		b.Run(name, func(b *testing.B) {
			for round := range b.N {
				took := timed(func() { create(round) })
				b.ReportMetric(float64(n)/took.Seconds(), "topics/s")
			}
		})
	}
	for _, clients := range []int{1, 4, 16} {
		client := keepAliveClient(b, clients)
		run(fmt.Sprintf("clients=%d", clients), func(round int) {
			parallel(b, n, clients, func(i int) {
				scalePost(b, client, node.URL+"/v1/topics", fmt.Sprintf(`{"name":"rate-%d-%d-%05d","partitions":1}`, clients, round, i), http.StatusCreated)
			})
		})
	}
	for _, clients := range []int{1, 4} {
		name := "kafka-one-request"
		if clients > 1 {
			name = fmt.Sprintf("kafka-clients=%d", clients)
		}
		adms := make([]*kadm.Client, clients)
		for i := range adms {
			cl, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr), kgo.RequestTimeoutOverhead(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
			adms[i] = kadm.NewClient(cl)
			adms[i].SetTimeoutMillis(60_000)
		}
		run(name, func(round int) {
			// Each client sends its share in requests of up to 1,000 topics
			// (the default --max-topics-per-request).
			per := (n + clients - 1) / clients
			parallel(b, clients, clients, func(c int) {
				for lo := c * per; lo < min(n, (c+1)*per); lo += 1000 {
					var names []string
					for i := lo; i < min(n, (c+1)*per, lo+1000); i++ {
						names = append(names, fmt.Sprintf("k-%d-%d-%05d", clients, round, i))
					}
					kafkaCreate(b, adms[c], names)
				}
			})
		})
	}
}

// kafkaCreate creates one-partition topics in one CreateTopics request.
func kafkaCreate(b *testing.B, adm *kadm.Client, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		b.Errorf("CreateTopics of %d topics: %v", len(names), err)
		return
	}
	if err := res.Error(); err != nil {
		b.Errorf("CreateTopics of %d topics: %v", len(names), err)
	}
}
