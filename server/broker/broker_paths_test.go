package broker

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
)

// Defence in depth: even a topic the FSM would refuse never makes the broker
// create (or later delete) a directory outside its partitions directory.
func TestBrokerRefusesPartitionDirsOutsideDataDir(t *testing.T) {
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	logger := slog.New(slog.DiscardHandler)
	b, err := New(Config{NodeID: 1, DataDir: dataDir, Files: segments.NewFileCache(16), Logger: logger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../../victimdir", "..", ".", "a/b", "/abs", "../partitions-x", ""} {
		tp := &raftfsm.Topic{Name: name, Partitions: []raftfsm.Partition{{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}
		if _, err := b.openLog(tp.Name, tp.ID, 0, segments.Config{}, nil); !errors.Is(err, errUnsafePartitionDir) {
			t.Fatalf("topic %q: err %v, want %v", name, err, errUnsafePartitionDir)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "data" {
		t.Fatalf("files outside the data dir: %v", entries)
	}
	if _, err := b.partitionDir("ok.topic_1-x", 3); err != nil {
		t.Fatalf("a legal name refused: %v", err)
	}
}

// The HTTP front door (which may import no other project package) and the
// FSM apply the same topic-name rules.
func TestTopicNameRulesAgree(t *testing.T) {
	for _, name := range []string{"", ".", "..", "...", "a", "a.b-c_D9", "a/b", "a b", "é", "../x", "a\x00",
		string(make([]byte, 249)), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"} {
		if a, f := api.ValidTopicName(name) == nil, raftfsm.ValidateTopicName(name) == nil; a != f {
			t.Errorf("%q: api says valid=%v, raftfsm valid=%v", name, a, f)
		}
	}
}

func FuzzTopicNameRulesAgree(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a.b", "../x", "a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if a, r := api.ValidTopicName(name) == nil, raftfsm.ValidateTopicName(name) == nil; a != r {
			t.Fatalf("%q: api valid=%v, raftfsm valid=%v", name, a, r)
		}
	})
}
