package raftfsm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// compatSnapshot is a snapshot written by the release before a partition's
// reassignment lists moved behind Partition.Reassignment (main 5b2c0cb, by
// TestWriteCompatSnapshot with RUNNEL_WRITE_COMPAT=raftfsm/testdata): topic
// "t" stored as JSON (command version 1) and topic "u" stored in binary
// (version 2), each with partition 0 in the middle of a reassignment.
const compatSnapshot = "testdata/snapshot-5b2c0cb"

// compatState applies the commands behind compatSnapshot.
func compatState(t *testing.T, f *FSM) {
	setup(t, f) // brokers 1..3, topic "t": [1 2], [2 3]
	for i, c := range []Command{
		reg(4, "d"),
		reassign(ReassignStart, 0, 2, 4),
		{SetCommandVersion: &SetCommandVersion{Version: 2}},
		create("u", []int32{1, 2}, []int32{2, 3}),
		{ReassignPartition: &ReassignPartition{Topic: "u", Partition: 0, Action: ReassignStart, Target: []int32{3, 4}}},
	} {
		if res := applyAt(t, f, uint64(5+i), c); isErr(res) {
			t.Fatalf("command %d: %v", i, res)
		}
	}
}

// TestWriteCompatSnapshot writes compatSnapshot (with the code of the
// release it stands for) when RUNNEL_WRITE_COMPAT names a directory.
func TestWriteCompatSnapshot(t *testing.T) {
	dir := os.Getenv("RUNNEL_WRITE_COMPAT")
	if dir == "" {
		t.Skip("RUNNEL_WRITE_COMPAT not set")
	}
	f := newTestFSM(t, t.TempDir())
	compatState(t, f)
	img, _ := f.Image()
	name := filepath.Join(dir, filepath.Base(compatSnapshot))
	if err := os.WriteFile(name+".bin", snapshotBytes(t, f), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name+".digest", []byte(img.Digest()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The previous release's snapshot restores to the image it had (its
// digest), the running reassignments included, in both stored forms; the
// same commands applied here make the same image; and a restored
// reassignment completes.
func TestSnapshotOfThePreviousRelease(t *testing.T) {
	data, err := os.ReadFile(compatSnapshot + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile(compatSnapshot + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFSM(t, t.TempDir())
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	img, _ := f.Image()
	if got := img.Digest(); got != string(digest) {
		t.Fatalf("restored digest %s, the previous release's %s", got, digest)
	}
	want := map[string]Partition{
		"t": {Leader: 1, PartitionEpoch: 1, Replicas: []int32{2, 4, 1}, ISR: []int32{1, 2},
			Reassignment: &Reassignment{Adding: []int32{4}, Removing: []int32{1}}},
		"u": {Leader: 1, PartitionEpoch: 1, Replicas: []int32{3, 4, 1, 2}, ISR: []int32{1, 2},
			Reassignment: &Reassignment{Adding: []int32{3, 4}, Removing: []int32{1, 2}}},
	}
	for name, p := range want {
		if got := img.Topics.Get(name).Partitions[0]; !reflect.DeepEqual(got, p) {
			t.Fatalf("%s/0 restored as %+v (reassignment %+v), want %+v", name, got, got.Reassignment, p)
		}
	}
	// The stored forms written here are the previous release's, byte for
	// byte.
	_, recs, err := readSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, r := range recs {
		name, ok := strings.CutPrefix(r.key, topicKey(""))
		if !ok {
			continue
		}
		stored++
		tp := img.Topics.Get(name)
		form := appendTopicBinary(nil, tp)
		if r.val[0] != topicBinaryMarker {
			form = topicJSON(tp)
		}
		if !bytes.Equal(form, r.val) {
			t.Fatalf("topic %s stored as\n%q, the previous release stored\n%q", name, form, r.val)
		}
	}
	if stored != 2 {
		t.Fatalf("%d stored topics in the snapshot, want 2", stored)
	}
	here := newTestFSM(t, t.TempDir())
	compatState(t, here)
	if now, _ := here.Image(); now.Digest() != string(digest) {
		t.Fatal("the same commands make a different image than the previous release's")
	}
	cur := img.Topics.Get("t").Partitions[0]
	if res := applyAt(t, f, img.Index+1, isrOf(0, cur.LeaderEpoch, cur.PartitionEpoch, 1, 1, 2, 4)); isErr(res) {
		t.Fatal(res)
	}
	img, _ = f.Image()
	if p := img.Topics.Get("t").Partitions[0]; p.Reassignment != nil || !reflect.DeepEqual(p.Replicas, []int32{2, 4}) {
		t.Fatalf("t/0 after its last target caught up: %+v", p)
	}
}
