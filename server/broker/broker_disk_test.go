package broker

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
)

// TestEmptyPartitionDiskCost: an empty partition takes at most 4 KB of disk
// (allocated blocks: its directory, files without data blocks), after it is
// created and after a clean close and reopen (issue 19: 100,000 partitions
// took 810 MB). A directory left by an older topic of the same name is
// still replaced, whichever way that topic recorded its id.
func TestEmptyPartitionDiskCost(t *testing.T) {
	dir := t.TempDir()
	needXattrs(t, dir)
	const parts = 20
	topic := &raftfsm.Topic{ID: [16]byte{7}, Name: "empty", Configs: map[string]string{}}
	for range parts {
		topic.Partitions = append(topic.Partitions, raftfsm.Partition{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
	}
	img := &raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(topic)}
	for round := range 2 { // created, then reopened after a clean close
		b, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Reconcile(img); err != nil {
			t.Fatal(err)
		}
		for i := range parts { // the first use creates (then opens) each log
			if _, err := b.Lookup("empty", int32(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if per := allocated(t, filepath.Join(dir, "partitions")) / parts; per > 4096 {
			t.Fatalf("round %d: %d bytes of disk per empty partition, want at most 4096", round, per)
		}
	}

	// A directory of an older "empty" (another id) is replaced, whether it
	// recorded the id in its extended attribute, in a partition.metadata
	// file (older versions) or in the name of an empty file (the previous
	// release).
	for i, record := range []string{topicIDXattr, "partition.metadata", "topic-id-06000000000000000000000000000000"} {
		older := filepath.Join(dir, "partitions", "empty-0")
		if err := os.MkdirAll(older, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, e := range mustReadDir(t, older) {
			os.Remove(filepath.Join(older, e.Name()))
		}
		files := map[string]string{"older-file": "x"}
		var attr []byte // the older topic's id, or (older releases) none
		if record == topicIDXattr {
			attr = []byte{6, 15: 0}
		} else {
			files[record] = "06000000000000000000000000000000\n"
		}
		if err := setOrRemoveXattr(older, attr); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(older, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		b, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Reconcile(img); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lookup("empty", 0); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if _, err := os.Stat(filepath.Join(older, "older-file")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("case %d (%s): the older topic's directory was kept: %v", i, record, err)
		}
	}
}

// setOrRemoveXattr sets dir's topic id attribute to id, or with id nil
// removes it.
func setOrRemoveXattr(dir string, id []byte) error {
	if id == nil {
		err := unix.Removexattr(dir, topicIDXattr)
		if errors.Is(err, unix.ENODATA) {
			return nil
		}
		return err
	}
	return unix.Setxattr(dir, topicIDXattr, id, 0)
}

func allocated(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}
