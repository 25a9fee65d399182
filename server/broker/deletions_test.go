package broker

import (
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// TestTopicDeletionOffTheBrokerLock (issue 13: no lock across I/O on hot
// paths): while the filesystem holds a deleted topic's removal, reconcile
// returns and the other topics' partitions are looked up and written; the
// topic created again under the same name opens only once the old log is
// gone, empty, and the old one never opens again.
func TestTopicDeletionOffTheBrokerLock(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if op == vfs.OpRemove && strings.Contains(filepath.Base(path), "old-") {
			once.Do(func() { close(held) })
			<-release
		}
		return nil
	})
	b, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler), FS: efs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	old, other := lazyTopic("old", 1, 4, map[string]string{}), lazyTopic("other", 2, 1, map[string]string{})
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(old, other)}); err != nil {
		t.Fatal(err)
	}
	write := func(topic string, idx int32) (*Partition, error) {
		p, err := b.Partition(topic, idx)
		if err != nil {
			return nil, err
		}
		_, err = p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}}))
		return p, err
	}
	if _, err := write("old", 0); err != nil {
		t.Fatal(err)
	}
	stale, err := b.lookup("old", 1) // made, its log not opened
	if err != nil {
		t.Fatal(err)
	}
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // before b.Close, which waits for the deletions

	// Delete "old" and create it again at once, under a new id.
	reconciled := make(chan error, 1)
	go func() {
		reconciled <- b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(lazyTopic("old", 9, 4, map[string]string{}), other)})
	}()
	<-held
	select {
	case err := <-reconciled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reconcile waited for the deleted topic's files to be removed")
	}
	if _, err := write("other", 0); err != nil {
		t.Fatalf("write to another topic while the deletion is held: %v", err)
	}
	if err := stale.ensureOpen(); err == nil {
		t.Fatal("a partition of the deleted topic opened after the deletion")
	}
	reopened := make(chan error, 1)
	go func() {
		p, err := b.Partition("old", 0)
		if err == nil {
			_, end, _, oerr := p.Offsets()
			if err = oerr; err == nil && end != 0 {
				t.Errorf("the created-again old-0 ends at %d: it found the deleted topic's log", end)
			}
		}
		reopened <- err
	}()
	select {
	case err := <-reopened:
		t.Fatalf("the created-again old-0 opened while the old log was being deleted (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	free()
	if err := <-reopened; err != nil {
		t.Fatal(err)
	}
	b.waitDeletions()
}
