package raftfsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// What an older node wrote (version 1 JSON, bytes as they were) still
// applies, and a command a proposer encodes without the newer commands is
// still written as version 1 JSON, so older nodes keep applying it.
func TestVersionOneCommandsStillApply(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	old := []string{
		`{"Version":1,"RegisterBroker":{"ID":1,"IncarnationID":"","Rack":"","HTTPAddr":"","KafkaAddr":""}}`,
		`{"Version":1,"RegisterBroker":{"ID":2,"IncarnationID":"","Rack":"","HTTPAddr":"","KafkaAddr":""}}`,
		`{"Version":1,"CreateTopic":{"Name":"t","TopicID":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"Partitions":2,"ReplicationFactor":2,"Configs":null,"Assignments":[[1,2],[2,1]]}}`,
		`{"Version":1,"ChangePartitions":{"Topic":"t","Changes":[{"Topic":"","Partition":0,"LeaderEpoch":0,"PartitionEpoch":0,"Leader":2,"ISR":[2]}]}}`,
	}
	for i, s := range old {
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: []byte(s)}); isErr(res) {
			t.Fatalf("version 1 command %d: %v", i, res)
		}
	}
	img, _ := f.Image()
	if p := img.Topics.Get("t").Partitions[0]; p.Leader != 2 || p.LeaderEpoch != 1 {
		t.Fatalf("partition after a version 1 move: %+v", p)
	}
	data, err := EncodeCommand(Command{ChangePartitions: &ChangePartitions{Topic: "t"}})
	if err != nil || !bytes.HasPrefix(data, []byte(`{"Version":1,`)) {
		t.Fatalf("a version 1 command encodes as %s (%v)", data, err)
	}
}

// A command written by a newer version stops the node (a panic naming the
// index) instead of being skipped or applied without the part this version
// does not know; what the batch applied before it is committed, so the
// upgraded node resumes at it. Before command versioning, a newer version
// was skipped with a warning and an unknown field silently dropped.
func TestNewerCommandStopsTheNode(t *testing.T) {
	for name, data := range map[string]string{
		"newer version":      `{"Version":3,"DeleteTopic":{"Name":"t"}}`,
		"newer, other shape": `{"Version":300,"DeleteTopic":"t"}`,
		"unknown field":      `{"Version":1,"DeleteTopic":{"Name":"t","IfEmpty":true}}`,
		"unknown command":    `{"Version":2,"DeleteEverything":{}}`,
		"newer binary":       "\x00\x03\x01\x00",
		"unknown binary":     "\x00\x02\x09\x00",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeCommand([]byte(data)); !errors.Is(err, ErrUnsupportedCommand) {
				t.Fatalf("decode: %v, want ErrUnsupportedCommand", err)
			}
			f := newTestFSM(t, t.TempDir())
			setup(t, f)
			before := commandLogAt(t, 5, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 1}})
			newer := &raft.Log{Index: 6, Type: raft.LogCommand, Data: []byte(data)}
			msg := applyPanics(t, f, []*raft.Log{before, newer})
			if !strings.Contains(msg, "index 6") || !strings.Contains(msg, "upgrade") {
				t.Fatalf("panic %q does not name the index and the fix", msg)
			}
			if f.AppliedIndex() != 5 {
				t.Fatalf("applied index %d after the stop, want 5 (the command before it)", f.AppliedIndex())
			}
			if img, _ := f.Image(); img.Topics.Get("t") == nil || img.NextProducerID != 1 {
				t.Fatalf("image after the stop: %+v", img)
			}
		})
	}
	// Malformed commands are still refused and skipped, as before, the
	// same way on every node.
	f := newTestFSM(t, t.TempDir())
	res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte(`{"Version":1,"DeleteTopic":{"Name":""}}`)})
	if err, ok := res.(error); !ok || !errors.Is(err, ErrInvalidTopicName) {
		t.Fatalf("malformed command: %v", res)
	}
}

func commandLogAt(t *testing.T, index uint64, cmd Command) *raft.Log {
	t.Helper()
	data, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

func applyPanics(t *testing.T, f *FSM, logs []*raft.Log) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("a command from a newer version was applied or skipped, not refused with a stop")
		}
		msg = fmt.Sprint(r)
	}()
	f.ApplyBatch(logs)
	return ""
}

// Raising the cluster's command version switches the stored topics to the
// binary form as they change; both forms load to the same image (same
// digest), and the batched leader moves apply across topics.
func TestCommandVersionTwo(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	setup(t, f)
	applyAt(t, f, 5, create("u", []int32{3, 1}, []int32{1, 2}, []int32{2, 3}))
	if res := applyAt(t, f, 6, Command{SetCommandVersion: &SetCommandVersion{Version: 2}}); res != int64(2) {
		t.Fatalf("SetCommandVersion: %v", res)
	}
	batch := Command{ChangePartitionsBatch: &ChangePartitionsBatch{Topics: []ChangePartitions{
		{Topic: "t", Changes: []ChangePartition{{Partition: 0, Leader: 2, ISR: []int32{2}}}},
		{Topic: "gone", Changes: []ChangePartition{{Partition: 0, Leader: 2, ISR: []int32{2}}}},
		{Topic: "u", Changes: []ChangePartition{
			{Partition: 1, Leader: 2, ISR: []int32{2}},
			{Partition: 2, LeaderEpoch: 7, Leader: 3, ISR: []int32{3}}, // stale: skipped
			{Partition: 2, Leader: -1, ISR: []int32{}},
		}},
	}}}
	data, err := EncodeCommand(batch)
	if err != nil || data[0] != binaryEnvelope || data[1] != 2 {
		t.Fatalf("batch encodes as %x (%v)", data, err)
	}
	if res := applyAt(t, f, 7, batch); res != int64(3) {
		t.Fatalf("batch applied %v changes, want 3", res)
	}
	img, _ := f.Image()
	if p := img.Topics.Get("u").Partitions[1]; p.Leader != 2 || p.LeaderEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{2}) {
		t.Fatalf("u/1 after the batch: %+v", p)
	}
	stored := storedValue(t, f.db, topicKey("u"))
	if stored[0] != topicBinaryMarker {
		t.Fatalf("topic changed at version 2 stored as %q", stored[:8])
	}
	if stored := storedValue(t, f.db, topicKey("t")); stored[0] != topicBinaryMarker {
		t.Fatal("topic t not stored in binary")
	}
	applyAt(t, f, 8, create("v", []int32{1}))
	// Reload from the state store: binary and JSON topics alike.
	img, _ = f.Image()
	want := img.Digest()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	g := newTestFSM(t, dir)
	got, _ := g.Image()
	if got.Digest() != want || got.CommandVersion != 2 {
		t.Fatalf("reloaded image differs (version %d)", got.CommandVersion)
	}
	if !reflect.DeepEqual(got.Topics.Get("u"), img.Topics.Get("u")) {
		t.Fatalf("reloaded topic %+v, applied %+v", got.Topics.Get("u"), img.Topics.Get("u"))
	}
	// Raising it again, or lower, changes nothing.
	if res := applyAt(t, g, 9, Command{SetCommandVersion: &SetCommandVersion{Version: 1}}); res != int64(2) {
		t.Fatalf("SetCommandVersion 1 after 2: %v", res)
	}
}

// A state store written by a newer version refuses to load, naming the fix.
func TestNewerStateRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenBadger(dir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(keyCommandVersion), []byte{CommandVersion + 1}) }); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := NewFSM(db, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("state of a newer version: %v", err)
	}
}

func storedValue(t *testing.T, db *badger.DB, key string) []byte {
	t.Helper()
	var v []byte
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The binary topic form decodes to an equal topic, nil and empty lists and
// maps told apart, as encoding/json does.
func TestTopicBinaryRoundTrip(t *testing.T) {
	for _, tp := range []*Topic{
		{Name: "a"},
		{Name: "b", ID: [16]byte{1, 2, 3}, Configs: map[string]string{}, Partitions: []Partition{}},
		{Name: "c", Configs: map[string]string{"retention.ms": "1", "cleanup.policy": "compact,delete"}, Partitions: []Partition{
			{Leader: -1, LeaderEpoch: 1 << 30, PartitionEpoch: -5, Replicas: []int32{1, 2, 3}, ISR: []int32{}},
			{Leader: 2, Replicas: []int32{2, 1<<31 - 1}, ISR: nil, Reassignment: &Reassignment{Adding: []int32{9}, Removing: []int32{8, 7}}},
		}},
	} {
		got, err := decodeTopic(appendTopicBinary(nil, tp))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tp) {
			t.Fatalf("decoded %+v, encoded %+v", got, tp)
		}
		if string(mustJSON(got)) != string(mustJSON(tp)) {
			t.Fatalf("JSON of decoded %s, of encoded %s", mustJSON(got), mustJSON(tp))
		}
		fromJSON, err := decodeTopic(topicJSON(tp))
		if err != nil || string(mustJSON(fromJSON)) != string(mustJSON(tp)) {
			t.Fatalf("JSON form: %v", err)
		}
	}
	for _, bad := range [][]byte{{0}, {0, 2}, append([]byte{0, 1}, make([]byte, 16)...), append(append([]byte{0, 1}, make([]byte, 16)...), 1, 'a', 0, 0xff, 0xff, 0xff, 0x7f)} {
		if _, err := decodeTopic(bad); err == nil {
			t.Fatalf("decoded corrupt topic %x", bad)
		}
	}
}

// Restore streams: a snapshot of a version 2 state restores to the same
// image.
func TestSnapshotRestoreBinaryTopics(t *testing.T) {
	src := newTestFSM(t, t.TempDir())
	setup(t, src)
	applyAt(t, src, 5, Command{SetCommandVersion: &SetCommandVersion{Version: 2}})
	applyAt(t, src, 6, create("w", []int32{1, 2}))
	data := snapshotBytes(t, src)
	dst := newTestFSM(t, t.TempDir())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	a, _ := src.Image()
	b, _ := dst.Image()
	if a.Digest() != b.Digest() || b.CommandVersion != 2 {
		t.Fatal("restored image differs")
	}
}

// A restore that fails once it has begun replacing the state (here a
// corrupt checksum, found at the end of the stream) leaves an FSM that
// applies nothing and snapshots nothing until a restore completes: the
// state store is half replaced and has no applied index.
func TestFailedStreamingRestoreStopsApplies(t *testing.T) {
	src := newTestFSM(t, t.TempDir())
	setup(t, src)
	data := snapshotBytes(t, src)
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 0xff // the checksum
	dst := newTestFSM(t, t.TempDir())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, errBadSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	if _, err := dst.Snapshot(); err == nil {
		t.Fatal("snapshot of a half-restored state")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("applied on a half-restored state")
			}
		}()
		dst.ApplyBatch([]*raft.Log{commandLogAt(t, 9, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 1}})})
	}()
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	a, _ := src.Image()
	b, _ := dst.Image()
	if a.Digest() != b.Digest() || dst.AppliedIndex() != 4 {
		t.Fatal("state after a good restore differs")
	}
	applyAt(t, dst, 5, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 1}})
}

// appendVarint32 writes binary.AppendVarint's bytes for every int32 (the
// stored topics and the leader moves' commands keep their encoding).
func TestAppendVarint32IsAppendVarint(t *testing.T) {
	vals := []int32{0, 1, -1, 63, -64, 64, -65, 127, 128, -129, 8191, -8192, 8192, 1 << 20, -(1 << 20), math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1}
	for i := range 10_000 {
		vals = append(vals, int32(uint32(i)*2654435761))
	}
	for _, v := range vals {
		if got, want := appendVarint32([]byte{9}, v), binary.AppendVarint([]byte{9}, int64(v)); !bytes.Equal(got, want) {
			t.Fatalf("%d: %x, want %x", v, got, want)
		}
	}
}
