package broker

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

func lazyTestBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restartBroker closes b and starts a broker again on dir with img
// applied, closed at the test's end.
func restartBroker(t *testing.T, b *Broker, dir string, img *raftfsm.Image) *Broker {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = lazyTestBroker(t, dir)
	t.Cleanup(func() { b.Close() })
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	return b
}

func lazyTopic(name string, id byte, parts int, cfgs map[string]string) *raftfsm.Topic {
	t := &raftfsm.Topic{ID: [16]byte{id}, Name: name, Configs: cfgs}
	for range parts {
		t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}})
	}
	return t
}

func partitionDirs(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, e := range mustReadDir(t, filepath.Join(dir, "partitions")) {
		if e.IsDir() { // not the high-watermark checkpoint
			names = append(names, e.Name())
		}
	}
	return names
}

// TestLazyPartitionLogs (issue 19): hosting a partition opens and creates
// nothing; its first use does (and only its own); a restart opens no log,
// and the first read of a log written before it returns its records. An
// empty unopened log answers its offsets and size without being opened.
func TestLazyPartitionLogs(t *testing.T) {
	dir := t.TempDir()
	img := &raftfsm.Image{Index: 5, Topics: raftfsm.TopicMapOf(lazyTopic("idle", 1, 50, map[string]string{}), lazyTopic("a", 2, 1, map[string]string{}))}
	b := lazyTestBroker(t, dir)
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	if dirs := partitionDirs(t, dir); len(dirs) != 0 {
		t.Fatalf("hosting 51 partitions created %d directories before any use: %v", len(dirs), dirs)
	}
	if n := len(b.opened()); n != 0 {
		t.Fatalf("%d logs open before any use, want 0", n)
	}
	p, err := b.Partition("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("kept"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	if dirs := partitionDirs(t, dir); !slices.Equal(dirs, []string{"a-0"}) {
		t.Fatalf("directories after a write to a-0: %v, want [a-0]", dirs)
	}
	b = restartBroker(t, b, dir, img)
	if n := len(b.opened()); n != 0 {
		t.Fatalf("%d logs opened by the restart, want 0", n)
	}
	idle := b.PartitionsOf("idle")[7]
	if start, end, hwm, err := idle.Offsets(); err != nil || start != 0 || end != 0 || hwm != 0 {
		t.Fatalf("offsets of an empty unopened log: %d %d %d %v, want 0 0 0", start, end, hwm, err)
	}
	a := b.PartitionsOf("a")[0]
	if size := a.SizeBytes(); size <= 0 {
		t.Fatalf("size of the unopened a-0: %d, want its batch's bytes", size)
	}
	if n := len(b.opened()); n != 0 {
		t.Fatalf("%d logs opened by offsets and size of an empty one, want 0", n)
	}
	if _, end, hwm, err := a.Offsets(); err != nil || end != 1 || hwm != 1 {
		t.Fatalf("offsets of a-0 after the restart: end %d hwm %d %v, want 1 1", end, hwm, err)
	}
	c, err := a.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() == 0 {
		t.Fatal("the first read of a-0 after the restart returned nothing")
	}
	if n := len(b.opened()); n != 1 {
		t.Fatalf("%d logs open after using a-0, want 1", n)
	}
	if dirs := partitionDirs(t, dir); len(dirs) != 1 {
		t.Fatalf("directories after the restart: %v, want [a-0]", dirs)
	}
}

// A config change reaches a log that was not open when it was applied, and
// a deleted topic's unopened logs are removed without being opened (and
// never open again).
func TestLazyPartitionConfigAndDelete(t *testing.T) {
	dir := t.TempDir()
	b := lazyTestBroker(t, dir)
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("t", 3, 3, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	p0, p2 := b.PartitionsOf("t")[0], b.PartitionsOf("t")[2]
	if _, err := b.Lookup("t", 1); err != nil { // t-1 has a directory, t-0 none
		t.Fatal(err)
	}
	changed := lazyTopic("t", 3, 3, map[string]string{"retention.ms": "1234"})
	if err := b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(changed)}); err != nil {
		t.Fatal(err)
	}
	if p0.log() != nil {
		t.Fatal("a config change opened t-0")
	}
	if err := p0.ensureOpen(); err != nil {
		t.Fatal(err)
	}
	if got := p0.log().Config().RetentionMs; got != 1234 {
		t.Fatalf("retention.ms of t-0 opened after the change: %d, want 1234", got)
	}
	if got := b.PartitionsOf("t")[1].log().Config().RetentionMs; got != 1234 {
		t.Fatalf("retention.ms of the open t-1: %d, want 1234", got)
	}

	if err := b.Reconcile(&raftfsm.Image{Index: 4, Topics: raftfsm.TopicMapOf(lazyTopic("u", 4, 1, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	b.waitDeletions() // deleted off the broker's lock
	if dirs := partitionDirs(t, dir); len(dirs) != 0 {
		t.Fatalf("directories left after deleting t: %v", dirs)
	}
	if err := p2.ensureOpen(); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("opening a deleted, never opened partition: %v, want %v", err, ErrUnknownTopic)
	}
	if dirs := partitionDirs(t, dir); len(dirs) != 0 {
		t.Fatalf("a deleted partition's first use made %v", dirs)
	}
	if n := len(b.opened()); n != 0 {
		t.Fatalf("%d logs still counted open after the delete", n)
	}
}

// Retention applies to a log nobody opened since the restart: the
// maintenance sweep opens the unopened logs that have a sealed segment and
// Maintain deletes what is past retention.ms; an empty unopened log stays
// closed.
func TestLazyPartitionRetentionSweep(t *testing.T) {
	dir := t.TempDir()
	cfgs := map[string]string{"retention.ms": "60000"}
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("r", 5, 3, cfgs))}
	b := lazyTestBroker(t, dir)
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("r", 1)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UnixMilli()
	for range 2 {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("old"), Timestamp: old}})); err != nil {
			t.Fatal(err)
		}
		if err := p.log().Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Lookup("r", 2); err != nil { // created, empty
		t.Fatal(err)
	}
	b = restartBroker(t, b, dir, img)
	b.maintain(context.Background(), time.Now())
	parts := b.PartitionsOf("r")
	if parts[1].log() == nil {
		t.Fatal("the sweep left r-1 (two sealed segments past retention) unopened")
	}
	if start := parts[1].log().StartOffset(); start != 2 {
		t.Fatalf("r-1 log start %d after maintenance, want 2 (its old segments deleted)", start)
	}
	if parts[0].log() != nil || parts[2].log() != nil {
		t.Fatal("the sweep opened an empty log")
	}
}

// BenchmarkHostPartitions: the memory a hosted partition costs the broker
// before its log is opened (issue 19: a million of them on one node), as
// heap bytes per partition after reconciling one topic of 10,000.
func BenchmarkHostPartitions(b *testing.B) {
	const parts = 10_000
	for range b.N {
		br, err := New(Config{NodeID: 1, DataDir: b.TempDir(), Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("h", 1, parts, map[string]string{}))}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := br.Reconcile(img); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/parts, "heap-B/partition")
		runtime.KeepAlive(img)
		br.Close()
	}
}

// First uses racing each other, a config change and the topic's deletion:
// the log opens once, and once deleted nothing makes its directory again
// (run with -race).
func TestLazyPartitionOpenRaces(t *testing.T) {
	dir := t.TempDir()
	b := lazyTestBroker(t, dir)
	defer b.Close()
	for round := range 20 {
		name := "race" + strconv.Itoa(round)
		img := &raftfsm.Image{Index: uint64(3*round + 1), Topics: raftfsm.TopicMapOf(lazyTopic(name, byte(round+1), 1, map[string]string{}))}
		if err := b.Reconcile(img); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		logs := make([]*segments.Log, 4)
		for i := range logs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if p, err := b.lookup(name, 0); err == nil && p.ensureOpen() == nil {
					logs[i] = p.log()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed := lazyTopic(name, byte(round+1), 1, map[string]string{"retention.ms": "1000"})
			b.Reconcile(&raftfsm.Image{Index: uint64(3*round + 2), Topics: raftfsm.TopicMapOf(changed)})
			b.Reconcile(&raftfsm.Image{Index: uint64(3*round + 3), Topics: raftfsm.TopicMapOf()})
		}()
		wg.Wait()
		for _, l := range logs {
			if l != nil && l != logs[slices.IndexFunc(logs, func(x *segments.Log) bool { return x != nil })] {
				t.Fatalf("round %d: the log was opened twice", round)
			}
		}
		b.waitDeletions() // deleted off the broker's lock
		if dirs := partitionDirs(t, dir); len(dirs) != 0 {
			t.Fatalf("round %d: directories after the topic's deletion: %v", round, dirs)
		}
	}
	if n := len(b.opened()); n != 0 {
		t.Fatalf("%d deleted partitions still counted open", n)
	}
}
