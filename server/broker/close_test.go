package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// TestCloseFlushesLogsTogether (issue 19): Close flushes the open logs
// several at a time, not one after another. Every fsync of a log file
// under the partitions is held at a gate once Close starts; Close must
// reach the gate with closeParallelism of them at once (the test gives it
// a minute, a deadline for a hang, not a measure of speed). Closing one
// log at a time, at 30,000 partitions the node spent minutes in Close after
// SIGTERM: each log's close is about a dozen fsyncs, and concurrent fsyncs
// share the filesystem journal's commits.
func TestCloseFlushesLogsTogether(t *testing.T) {
	const logs = closeParallelism + 4
	var gated atomic.Bool
	entered := make(chan string, 1024)
	release := make(chan struct{})
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && gated.Load() && strings.Contains(path, "gate-") {
			entered <- path
			<-release
		}
		return nil
	})
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(4 * logs),
		Logger: slog.New(slog.DiscardHandler), FS: efs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("gate", 7, logs, map[string]string{}))}); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		p, err := b.Partition("gate", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(fmt.Sprint(i)), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}

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
