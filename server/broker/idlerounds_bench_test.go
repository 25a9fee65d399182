package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// BenchmarkIdleRounds is one broker's periodic work with every hosted log
// open and idle (issue 19: after the first acks=all write to each of
// 300,000 partitions, every loop of a node ran over all its open logs each
// round, and the kill phase ran with all of them open). One op is one
// round of each loop, with writesPerRound records written to as many logs
// before it: the maintenance round, the high-watermark
// checkpoint round, the storage loop's look for failed logs and the ISR
// check. Each is reported as the process's CPU a round (getrusage: the
// GC's background work included), and cpu-ms/s weighs them by how often
// they run on a node (maintenance and checkpoint every 5 s, storage and
// ISR every second): the CPU a second of wall time that N idle logs cost.
// 2,000 logs; with RUNNEL_BENCH=1 10,000 and 100,000, or
// RUNNEL_BENCH_LOGS (e.g. 300000: about 3 GB of heap and 1.2 GB of disk).
func BenchmarkIdleRounds(b *testing.B) {
	sizes := []int{2_000}
	if os.Getenv("RUNNEL_BENCH") == "1" {
		sizes = []int{10_000, 100_000}
	}
	if n, err := strconv.Atoi(os.Getenv("RUNNEL_BENCH_LOGS")); err == nil && n > 0 {
		sizes = []int{n}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("logs=%d", n), func(b *testing.B) { benchIdleRounds(b, n) })
	}
}

// writesPerRound is how many of the idle logs take a record between two
// rounds of BenchmarkIdleRounds.
const writesPerRound = 10

func benchIdleRounds(b *testing.B, logs int) {
	br := idleLogs(b, b.TempDir(), logs)
	defer br.Close()
	next := 0
	benchRounds(b, br, func() {
		// A few writes a round: the checkpoint round has marks to write.
		for range writesPerRound {
			p, err := br.Partition("idle", int32(next%logs))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("w"), Timestamp: 1}})); err != nil {
				b.Fatal(err)
			}
			next += logs/writesPerRound + 1
		}
	})
}

// benchRounds runs br's periodic loops a round each per op, after
// between() (the writes between two rounds), and reports each loop's
// process CPU a round and their weighted sum a second (BenchmarkIdleRounds).
func benchRounds(b *testing.B, br *Broker, between func()) {
	ctx := context.Background()
	loops := []struct {
		name   string
		perSec float64 // rounds a second on a node
		round  func()
	}{
		{"maintain", 1.0 / 5, func() { br.maintain(ctx, time.Now()) }},
		{"checkpoint", 1.0 / 5, func() {
			if err := br.checkpointHWMs(); err != nil {
				b.Fatal(err)
			}
		}},
		{"storage", 1, func() { br.failedPartitions() }},
		{"isr", 1, func() { br.isrRound(ctx, time.Now()) }},
	}
	// The state the rounds find on a node once the writes are over: each
	// loop ran once since (each log maintained, its mark checkpointed, its
	// ISR checked).
	for _, l := range loops {
		l.round()
	}
	cpu := make([]time.Duration, len(loops))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		between()
		for i, l := range loops {
			c0 := processCPU(b)
			l.round()
			cpu[i] += processCPU(b) - c0
		}
	}
	perSec := 0.0
	for i, l := range loops {
		ms := float64(cpu[i].Microseconds()) / 1e3 / float64(b.N)
		b.ReportMetric(ms, l.name+"-cpu-ms/round")
		perSec += ms * l.perSec
	}
	b.ReportMetric(perSec, "cpu-ms/s")
}

// processCPU is the user and kernel CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleLogs is a broker leading n partitions of one topic, each written once
// (its log open), following a fake metadata quorum holding that image.
func idleLogs(b *testing.B, dir string, n int) *Broker {
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("idle", 7, n, map[string]string{}))}
	br, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(1024),
		Logger: slog.New(slog.DiscardHandler)}, &fakeMeta{img: img})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Reconcile(img); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		p, err := br.Partition("idle", int32(i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(fmt.Sprint(i)), Timestamp: 1}})); err != nil {
			b.Fatal(err)
		}
	}
	return br
}
