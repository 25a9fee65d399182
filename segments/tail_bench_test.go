package segments

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// BenchmarkReadJustAppended is a leader serving its followers at scale
// (issue 19): one op appends a 100-byte record to the next of n logs
// (2,000; 20,000 with RUNNEL_BENCH=1), more than the 256 files the shared
// FileCache keeps open, and reads back, as a follower's fetch does (Read
// from its offset, Bytes as the Kafka door copies a small chunk), the
// batch appended n/2 ops before, to a log whose file the appends since
// pushed out of the cache. With the tail off the read reopens that file;
// with it on, the read is answered from memory.
// Reported: opens/op (of .log files, the append's included), read-µs/op
// (the read alone, wall time), cpu-µs/op (the process's user and system
// CPU per op, the append's included), and the memory: tail-MiB (what the
// TailCache counts) and heap-MiB (the live heap at the end, logs and
// tails; the difference between tail off and on is the tails' real cost).
func BenchmarkReadJustAppended(b *testing.B) {
	n := 2000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		n = 20000
	}
	for _, tail := range []bool{false, true} {
		b.Run(fmt.Sprintf("logs=%d/tail=%v", n, tail), func(b *testing.B) { readJustAppended(b, n, tail) })
	}
}

func readJustAppended(b *testing.B, n int, tail bool) {
	var opens atomic.Int64
	fsys := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if (op == vfs.OpOpen || op == vfs.OpCreate) && strings.HasSuffix(path, logSuffix) {
			opens.Add(1)
		}
		return nil
	})
	opts := Options{FS: fsys, Files: NewFileCache(256)}
	if tail {
		opts.Tails = NewTailCache(64<<20, 0)
	}
	root := b.TempDir()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Create(filepath.Join(root, fmt.Sprint(i)), DefaultConfig(), opts)
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = l
	}
	defer func() {
		for _, l := range logs {
			abandon(l)
		}
	}()
	batch := valueBatch(1, 100, 1)
	buf := slices.Clone(batch)
	appended := make([]int64, n) // the offset of the last batch appended to each log
	for i, l := range logs {
		copy(buf, batch)
		info, err := l.Append(buf, 1)
		if err != nil {
			b.Fatal(err)
		}
		appended[i] = info.BaseOffset
	}
	var reading time.Duration
	var ru0 syscall.Rusage
	ops := 0
	for ; b.Loop(); ops++ {
		if ops == 0 {
			opens.Store(0)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		}
		i := ops % n
		copy(buf, batch)
		info, err := logs[i].Append(buf, 1)
		if err != nil {
			b.Fatal(err)
		}
		appended[i] = info.BaseOffset
		j := (i + n/2) % n
		t0 := time.Now()
		c, err := logs[j].Read(appended[j], 1<<20, -1)
		if err != nil {
			b.Fatal(err)
		}
		got, err := c.Bytes()
		c.Close()
		if err != nil || len(got) != len(batch) {
			b.Fatalf("read %d bytes (%v), appended %d", len(got), err, len(batch))
		}
		reading += time.Since(t0)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(opens.Load())/float64(ops), "opens/op")
	b.ReportMetric(float64(reading.Microseconds())/float64(ops), "read-µs/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "cpu-µs/op")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(opts.Tails.Bytes())/(1<<20), "tail-MiB")
}
