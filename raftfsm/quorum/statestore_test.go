package quorum_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// TestStateStoreBehindLog: the state store is written without syncs, so a
// machine crash may leave it behind the raft log. Put back an older copy of
// it (as such a crash would leave it), with and without a snapshot taken
// since: the node comes back with every change the log acknowledged.
func TestStateStoreBehindLog(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(map[bool]string{false: "log only", true: "snapshot since"}[snapshot], func(t *testing.T) {
			dir := t.TempDir()
			n := openSingle(t, dir)
			apply(t, n, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}})
			apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "before", Partitions: 1, ReplicationFactor: 1}})
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			old := filepath.Join(t.TempDir(), "state")
			if err := os.CopyFS(old, os.DirFS(filepath.Join(dir, "state"))); err != nil {
				t.Fatal(err)
			}

			n = openSingle(t, dir)
			apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "after", Partitions: 2, ReplicationFactor: 1}})
			if snapshot {
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			apply(t, n, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "before"}})
			apply(t, n, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "last", Partitions: 1, ReplicationFactor: 1}})
			img, _ := n.Image()
			want, index := img.Digest(), img.Index
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}

			if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(filepath.Join(dir, "state"), os.DirFS(old)); err != nil {
				t.Fatal(err)
			}
			n = openSingle(t, dir)
			img, _ = n.Image()
			if img.Digest() != want || img.Index != index || img.Topics.Get("last") == nil || img.Topics.Get("before") != nil {
				t.Fatalf("state after restart: index %d (want %d), %d topics, digest equal %v",
					img.Index, index, img.Topics.Len(), img.Digest() == want)
			}
		})
	}
}
