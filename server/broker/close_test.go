package broker

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// writtenLogs makes a broker on fsys with n partitions of topic "gate",
// each written once and its high watermark moved.
func writtenLogs(t testing.TB, dir string, fsys vfs.FS, n int) *Broker {
	t.Helper()
	b, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(4 * n),
		Logger: slog.New(slog.DiscardHandler), FS: fsys}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("gate", 7, n, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p, err := b.Partition("gate", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(fmt.Sprint(i)), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// noFSSync hides the filesystem sync of the FS it wraps.
type noFSSync struct{ vfs.FS }

// TestCloseFlushesLogsTogether (issue 19): on a filesystem without a sync
// of its own (vfs.FSSyncer), Close flushes the open logs several at a time,
// not one after another. Every fsync of a log file is held at a gate once
// Close starts; Close must reach the gate with closeParallelism of them at
// once (the test gives it a minute, a deadline for a hang, not a measure of
// speed). Closing one log at a time, at 30,000 partitions the node spent
// minutes in Close after SIGTERM: each log's close is about a dozen fsyncs,
// and concurrent fsyncs share the filesystem journal's commits.
func TestCloseFlushesLogsTogether(t *testing.T) {
	const logs = closeParallelism + 4
	var gated atomic.Bool
	entered := make(chan string, 1024)
	release := make(chan struct{})
	efs := vfs.NewErrorFS(noFSSync{vfs.OSFS()}, func(op vfs.Op, path string) error {
		if op == vfs.OpSync && gated.Load() && strings.Contains(path, "gate-") {
			entered <- path
			<-release
		}
		return nil
	})
	b := writtenLogs(t, t.TempDir(), efs, logs)
	gated.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	deadline := time.After(time.Minute)
	var held []string
	for len(held) < closeParallelism {
		select {
		case p := <-entered:
			held = append(held, p)
		case <-deadline:
			close(release)
			<-closed
			t.Fatalf("Close held %d fsyncs at once after a minute, want %d (logs closed one after another): %v", len(held), closeParallelism, held)
		}
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestCloseSyncsTheFilesystem (issue 19): on the OS's filesystem, Close
// makes its written logs durable with one sync of the filesystem, no fsync
// of any file or directory and, their tails being small, no file created
// or renamed (one after another, about a dozen fsyncs a log: minutes for
// 20,000 logs after SIGTERM; then three syncs and four small files a log,
// 60 s for 30,000) but the partitions directory's one high-watermark
// checkpoint (TestCheckpointRoundFsyncsOnce counts those); the logs reopen with their records and, led by this
// broker alone, their high watermarks.
func TestCloseSyncsTheFilesystem(t *testing.T) {
	const logs = 20
	var counting atomic.Bool
	var syncs, fsyncs, files atomic.Int64
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if !counting.Load() || strings.HasPrefix(filepath.Base(path), hwmCheckpointFile) || op == vfs.OpSyncDir && filepath.Base(path) == "partitions" {
			return nil // the one high-watermark checkpoint of all the logs (hwmcheckpoint.go)
		}
		switch op {
		case vfs.OpSyncFS:
			syncs.Add(1)
		case vfs.OpSync, vfs.OpSyncDir:
			fsyncs.Add(1)
		case vfs.OpCreate, vfs.OpRename:
			files.Add(1)
		}
		return nil
	})
	dir := t.TempDir()
	b := writtenLogs(t, dir, efs, logs)
	hwms := make([]int64, logs)
	for i := range logs {
		p, _ := b.Partition("gate", int32(i))
		if hwms[i] = p.hwm.Load(); hwms[i] != 1 {
			t.Fatalf("gate-%d: high watermark %d after its write, want 1", i, hwms[i])
		}
	}
	counting.Store(true)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	counting.Store(false)
	if s, f, n := syncs.Load(), fsyncs.Load(), files.Load(); s != 1 || f != 0 || n != 0 {
		t.Fatalf("Close of %d written logs: %d filesystem syncs, %d fsyncs, %d files created or renamed; want 1, 0 and 0", logs, s, f, n)
	}
	b = lazyTestBroker(t, dir)
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("gate", 7, logs, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		p, err := b.Partition("gate", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if end, hw := p.log().EndOffset(), p.hwm.Load(); end != 1 || hw != hwms[i] {
			t.Errorf("gate-%d reopened: end %d, high watermark %d; want 1 and %d", i, end, hw, hwms[i])
		}
	}
}
