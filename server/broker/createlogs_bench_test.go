package broker

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
)

// BenchmarkCreateLogs is the first use of new partitions on one data dir
// (issue 19: a 3-node run at 300,000 partitions spent most of its first
// writes creating logs): replicaApplyWorkers goroutines open (create) the
// logs of 100 partitions a topic, 100,000 partitions with RUNNEL_BENCH=1,
// 2,000 otherwise. ns/partition is wall time; sys-us/partition is the
// process's kernel CPU per log (getrusage), the part the filesystem's
// layout decides. On a filesystem without a journal (ext4 here), inodes
// deleted within the last ~35 s make every inode allocation slower: run
// alternated benchmarks with a pause between them.
func BenchmarkCreateLogs(b *testing.B) {
	parts := 2_000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		parts = 100_000
	}
	const perTopic = 100
	var topics []*raftfsm.Topic
	for i := range parts / perTopic {
		topics = append(topics, lazyTopic(fmt.Sprintf("create-%04d", i), byte(i), perTopic, map[string]string{}))
		topics[i].ID[1] = byte(i >> 8)
	}
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(topics...)}
	var elapsed, sys time.Duration
	for b.Loop() {
		b.StopTimer()
		br, err := New(Config{NodeID: 1, DataDir: b.TempDir(), Files: segments.NewFileCache(1024), Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Reconcile(img); err != nil {
			b.Fatal(err)
		}
		sys0 := sysTime(b)
		start := time.Now()
		b.StartTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range replicaApplyWorkers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(parts); i = next.Add(1) - 1 {
					if _, err := br.Lookup(topics[i/perTopic].Name, int32(i%perTopic)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		elapsed += time.Since(start)
		sys += sysTime(b) - sys0
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N * parts)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/partition")
	b.ReportMetric(float64(sys.Microseconds())/n, "sys-us/partition")
	b.ReportMetric(0, "ns/op")
}

// sysTime is the kernel CPU time the process has used.
func sysTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Stime.Nano())
}
