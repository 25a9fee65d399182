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

// A log whose failure no operation of the broker returned, the flush of a
// segment its roll sealed failing on the log's own goroutine after the
// append that rolled succeeded, is listed by the storage loop's next look
// (the look asks no log for its error: the log tells the broker when it
// fails), and no longer once it recovered.
func TestBackgroundFailureListed(t *testing.T) {
	const logs = 8
	var failing atomic.Value
	failing.Store("")
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if f := failing.Load().(string); f != "" && strings.Contains(path, "/"+f+"/") && op == vfs.OpSync {
			return vfs.ErrInjected
		}
		return nil
	})
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(64),
		Logger: slog.New(slog.DiscardHandler), FS: efs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("roll", 7, logs, map[string]string{"segment.bytes": "1024"}))}
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	parts := make([]*Partition, logs)
	for i := range parts {
		if parts[i], err = b.Partition("roll", int32(i)); err != nil {
			t.Fatal(err)
		}
		appendN(t, parts[i], 1, "first")
	}
	names := func() (out []string) {
		for _, r := range b.failedPartitions() {
			out = append(out, fmt.Sprintf("%s-%d", r.Topic(), r.Index()))
		}
		return out
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("failed logs %v before any failure", got)
	}
	failing.Store("roll-5")
	p := parts[5]
	for p.log().Segments() < 2 {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: make([]byte, 400), Timestamp: 1}})); err != nil {
			t.Fatalf("append (its own writes do not fsync): %v", err)
		}
	}
	deadline := time.Now().Add(time.Minute) // a bound for a hang, not a measure
	for p.log().Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the sealed segment's failing flush did not fail the log")
		}
		time.Sleep(time.Millisecond)
	}
	if got := names(); fmt.Sprint(got) != "[roll-5]" {
		t.Fatalf("failed logs %v after roll-5's seal flush failed, want [roll-5]", got)
	}
	failing.Store("")
	for _, r := range b.failedPartitions() {
		if err := r.Recover(); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("failed logs %v after they recovered", got)
	}
}
