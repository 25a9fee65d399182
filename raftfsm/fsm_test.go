package raftfsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

func newTestFSM(t *testing.T, dir string) *FSM {
	t.Helper()
	db, err := OpenBadger(dir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFSM(db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return f
}

// applyAt applies cmd at index through the raft log encoding.
func applyAt(t *testing.T, f *FSM, index uint64, cmd Command) any {
	t.Helper()
	// Version 0: EncodeCommand writes the lowest version that expresses cmd.
	data, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	checkLoad(t, f)
	return res
}

// checkLoad compares the counts the FSM keeps incrementally (load.go) with a
// full scan of its image, after every command of every test that applies
// through applyAt.
func checkLoad(t *testing.T, f *FSM) {
	t.Helper()
	img, _ := f.images.load()
	if img.load == nil {
		t.Fatalf("image at index %d has no partition load", img.Index)
	}
	if got, want := *img.load, *scanLoad(img); !reflect.DeepEqual(got, want) {
		t.Fatalf("image at index %d: incremental load %+v, scanned %+v", img.Index, got, want)
	}
}

func reg(id int32, rack string) Command {
	return Command{RegisterBroker: &RegisterBroker{ID: id, Rack: rack}}
}

func create(name string, as ...[]int32) Command {
	rf := int16(0)
	if len(as) > 0 {
		rf = int16(len(as[0]))
	}
	return Command{CreateTopic: &CreateTopic{Name: name, Partitions: int32(len(as)), ReplicationFactor: rf, Assignments: as}}
}

// setup is applied before each case: brokers 1..3 at indexes 1..3, topic
// "t" with two partitions at index 4.
func setup(t *testing.T, f *FSM) {
	for i, c := range []Command{reg(1, "a"), reg(2, "b"), reg(3, "c"), create("t", []int32{1, 2}, []int32{2, 3})} {
		if res := applyAt(t, f, uint64(i+1), c); isErr(res) {
			t.Fatalf("setup %d: %v", i, res)
		}
	}
}

func isErr(v any) bool { _, ok := v.(error); return ok }

func TestFSMCommands(t *testing.T) {
	tests := []struct {
		name  string
		cmd   Command
		err   error
		check func(t *testing.T, res any, img *Image)
	}{
		{name: "create topic", cmd: create("u", []int32{3}),
			check: func(t *testing.T, res any, img *Image) {
				tp := res.(*Topic)
				if img.Topics.Get("u") != tp || tp.Partitions[0].Leader != 3 || !reflect.DeepEqual(tp.Partitions[0].ISR, []int32{3}) {
					t.Fatalf("topic %+v", tp)
				}
				if tp.ID == ([16]byte{}) {
					t.Fatal("no topic id")
				}
			}},
		{name: "create existing", cmd: create("t", []int32{1}), err: ErrTopicExists},
		{name: "create zero partitions", cmd: Command{CreateTopic: &CreateTopic{Name: "z", ReplicationFactor: 1}}, err: ErrInvalidPartitions},
		{name: "create zero rf", cmd: Command{CreateTopic: &CreateTopic{Name: "z", Partitions: 1}}, err: ErrInvalidReplicationFactor},
		{name: "create unknown broker", cmd: create("z", []int32{9}), err: ErrUnknownBroker},
		{name: "create duplicate replica", cmd: create("z", []int32{1, 1}), err: ErrInvalidAssignment},
		{name: "create ragged", cmd: create("z", []int32{1, 2}, []int32{1}), err: ErrInvalidAssignment},
		{name: "create empty name", cmd: create("", []int32{1}), err: ErrInvalidTopicName},
		{name: "delete", cmd: Command{DeleteTopic: &DeleteTopic{Name: "t"}},
			check: func(t *testing.T, res any, img *Image) {
				if _, ok := img.Topics.Lookup("t"); ok || res.(*Topic).Name != "t" {
					t.Fatal("topic not deleted")
				}
			}},
		{name: "delete unknown", cmd: Command{DeleteTopic: &DeleteTopic{Name: "x"}}, err: ErrUnknownTopic},
		{name: "alter configs", cmd: Command{AlterConfigs: &AlterConfigs{Topic: "t", Set: map[string]string{"a": "1"}, Delete: []string{"b"}}},
			check: func(t *testing.T, res any, img *Image) {
				if img.Topics.Get("t").Configs["a"] != "1" {
					t.Fatalf("configs %v", img.Topics.Get("t").Configs)
				}
			}},
		{name: "alter unknown", cmd: Command{AlterConfigs: &AlterConfigs{Topic: "x"}}, err: ErrUnknownTopic},
		// List ops (Kafka's APPEND and SUBTRACT) apply to the value in the
		// log's order, from the default when the topic sets none.
		{name: "alter list ops", cmd: Command{AlterConfigs: &AlterConfigs{Topic: "t", Set: map[string]string{"x": "1"}, ListOps: []ConfigListOp{
			{Name: "cleanup.policy", Values: []string{"compact", "delete"}, Default: "delete"},
			{Name: "throttled", Values: []string{"0:1", "1:2"}},
			{Name: "throttled", Subtract: true, Values: []string{"0:1", "9:9"}},
		}}},
			check: func(t *testing.T, res any, img *Image) {
				c := img.Topics.Get("t").Configs
				if c["cleanup.policy"] != "delete,compact" || c["throttled"] != "1:2" || c["x"] != "1" {
					t.Fatalf("configs %v", c)
				}
			}},
		{name: "alter list op emptying a list with a default", cmd: Command{AlterConfigs: &AlterConfigs{Topic: "t", ListOps: []ConfigListOp{
			{Name: "cleanup.policy", Subtract: true, Values: []string{"delete"}, Default: "delete"}}}}, err: ErrInvalidConfig},
		{name: "alter list op unknown topic", cmd: Command{AlterConfigs: &AlterConfigs{Topic: "x", ListOps: []ConfigListOp{
			{Name: "cleanup.policy", Values: []string{"compact"}, Default: "delete"}}}}, err: ErrUnknownTopic},
		{name: "create partitions", cmd: Command{CreatePartitions: &CreatePartitions{Topic: "t", Count: 3, Assignments: [][]int32{{3, 1}}}},
			check: func(t *testing.T, res any, img *Image) {
				if n := len(img.Topics.Get("t").Partitions); n != 3 {
					t.Fatalf("%d partitions", n)
				}
			}},
		{name: "create partitions shrink", cmd: Command{CreatePartitions: &CreatePartitions{Topic: "t", Count: 2}}, err: ErrInvalidPartitions},
		{name: "create partitions wrong rf", cmd: Command{CreatePartitions: &CreatePartitions{Topic: "t", Count: 3, Assignments: [][]int32{{3}}}}, err: ErrInvalidAssignment},
		{name: "register again", cmd: reg(2, "b"),
			check: func(t *testing.T, res any, img *Image) {
				if b := res.(*Broker); b.Epoch != 10 || img.Brokers[2] != b {
					t.Fatalf("broker %+v", b)
				}
			}},
		{name: "register negative", cmd: reg(-1, ""), err: ErrInvalidCommand},
		{name: "fence", cmd: Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 2, State: BrokerFenced}},
			check: func(t *testing.T, res any, img *Image) {
				if img.Brokers[2].State != BrokerFenced {
					t.Fatal("not fenced")
				}
			}},
		{name: "fence stale", cmd: Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 1, State: BrokerFenced}}, err: ErrStaleEpoch},
		{name: "fence unknown", cmd: Command{SetBrokerState: &SetBrokerState{ID: 7, State: BrokerFenced}}, err: ErrUnknownBroker},
		{name: "bad state", cmd: Command{SetBrokerState: &SetBrokerState{ID: 2, Epoch: 2, State: "gone"}}, err: ErrInvalidCommand},
		{name: "change leader", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 1, Leader: 3, ISR: []int32{3}}},
			check: func(t *testing.T, res any, img *Image) {
				p := img.Topics.Get("t").Partitions[1]
				if p.Leader != 3 || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{3}) {
					t.Fatalf("partition %+v", p)
				}
				if got := res.(*Partition); !reflect.DeepEqual(*got, p) {
					t.Fatalf("result %+v", got)
				}
			}},
		{name: "shrink isr", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1}}},
			check: func(t *testing.T, res any, img *Image) {
				if p := img.Topics.Get("t").Partitions[0]; p.LeaderEpoch != 0 || p.PartitionEpoch != 1 {
					t.Fatalf("partition %+v", p)
				}
			}},
		{name: "offline", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, Leader: -1}},
			check: func(t *testing.T, res any, img *Image) {
				if p := img.Topics.Get("t").Partitions[0]; p.Leader != -1 || p.LeaderEpoch != 1 {
					t.Fatalf("partition %+v", p)
				}
			}},
		{name: "change stale", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, LeaderEpoch: 1, Leader: 1, ISR: []int32{1}}}, err: ErrStaleEpoch},
		{name: "leader outside isr", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, Leader: 2, ISR: []int32{1}}}, err: ErrInvalidAssignment},
		{name: "isr outside replicas", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1, 3}}}, err: ErrInvalidAssignment},
		{name: "unknown partition", cmd: Command{ChangePartition: &ChangePartition{Topic: "t", Partition: 2}}, err: ErrUnknownPartition},
		{name: "change many", cmd: Command{ChangePartitions: &ChangePartitions{Topic: "t", Changes: []ChangePartition{
			{Partition: 0, Leader: 2, ISR: []int32{2}},
			{Partition: 1, LeaderEpoch: 7, Leader: 3, ISR: []int32{3}}, // stale: skipped
			{Partition: 1, Leader: 1, ISR: []int32{1}},                 // outside the replicas: skipped
			{Partition: 5, Leader: 1},                                  // unknown: skipped
		}}},
			check: func(t *testing.T, res any, img *Image) {
				p0, p1 := img.Topics.Get("t").Partitions[0], img.Topics.Get("t").Partitions[1]
				if res.(int64) != 1 || p0.Leader != 2 || p0.LeaderEpoch != 1 || p1.Leader != 2 || p1.PartitionEpoch != 0 {
					t.Fatalf("result %v, partitions %+v %+v", res, p0, p1)
				}
			}},
		{name: "change many unknown topic", cmd: Command{ChangePartitions: &ChangePartitions{Topic: "x"}}, err: ErrUnknownTopic},
		{name: "reregister with heartbeats", cmd: Command{RegisterBroker: &RegisterBroker{ID: 2, RaftAddr: "h:1", Heartbeats: true}},
			check: func(t *testing.T, res any, img *Image) {
				if b := img.Brokers[2]; b.State != BrokerFenced || b.Epoch != 10 || b.RaftAddr != "h:1" || !b.Heartbeats {
					t.Fatalf("broker %+v", b)
				}
			}},
		{name: "producer ids", cmd: Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 1000}},
			check: func(t *testing.T, res any, img *Image) {
				if res.(int64) != 0 || img.NextProducerID != 1000 {
					t.Fatalf("first %v next %d", res, img.NextProducerID)
				}
			}},
		{name: "producer ids zero", cmd: Command{AllocateProducerIDs: &AllocateProducerIDs{}}, err: ErrInvalidCommand},
		{name: "init cluster", cmd: Command{InitCluster: &InitCluster{ClusterID: "abc"}},
			check: func(t *testing.T, res any, img *Image) {
				if res != "abc" || img.ClusterID != "abc" {
					t.Fatalf("cluster %v %q", res, img.ClusterID)
				}
			}},
		{name: "init cluster empty", cmd: Command{InitCluster: &InitCluster{}}, err: ErrInvalidCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFSM(t, t.TempDir())
			setup(t, f)
			before, changed := f.Image()
			res := applyAt(t, f, 10, tc.cmd)
			img, _ := f.Image()
			if tc.err != nil {
				if err, _ := res.(error); !errors.Is(err, tc.err) {
					t.Fatalf("result %v, want %v", res, tc.err)
				}
				if img != before || img.Digest() != before.Digest() {
					t.Fatal("a rejected command changed the image")
				}
				return
			}
			if isErr(res) {
				t.Fatalf("unexpected error %v", res)
			}
			select {
			case <-changed:
			default:
				t.Fatal("image change not signalled")
			}
			if img.Index != 10 {
				t.Fatalf("image index %d", img.Index)
			}
			tc.check(t, res, img)
			// The state in badger matches the published image.
			loaded, applied, err := loadImage(f.db)
			if err != nil || applied != 10 || loaded.Digest() != img.Digest() {
				t.Fatalf("badger state: applied %d err %v, digest mismatch %v", applied, err, loaded.Digest() != img.Digest())
			}
		})
	}
}

func TestFSMCopyOnWrite(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	setup(t, f)
	applyAt(t, f, 5, create("u", []int32{1}))
	before, _ := f.Image()
	applyAt(t, f, 6, Command{AlterConfigs: &AlterConfigs{Topic: "t", Set: map[string]string{"k": "v"}}})
	after, _ := f.Image()
	if before.Topics.Get("u") != after.Topics.Get("u") {
		t.Error("unchanged topic not shared")
	}
	if before.Topics.Get("t") == after.Topics.Get("t") || len(before.Topics.Get("t").Configs) != 0 {
		t.Error("changed topic modified in place")
	}
}

func TestFSMIdempotentReplay(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	setup(t, f)
	applyAt(t, f, 5, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 10}})
	img, _ := f.Image()
	want := img.Digest()
	// Replaying applied indexes, even with other commands, changes nothing.
	for i := uint64(1); i <= 5; i++ {
		if res := applyAt(t, f, i, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 10}}); res != nil {
			t.Fatalf("replay %d: %v", i, res)
		}
	}
	if img2, _ := f.Image(); img2 != img || img2.NextProducerID != 10 {
		t.Fatalf("replay changed the image: next producer id %d", img2.NextProducerID)
	}
	// Reopening the badger state gives the same image and applied index.
	_ = f.db.Close()
	f2 := newTestFSM(t, dir)
	if f2.AppliedIndex() != 5 {
		t.Fatalf("applied %d after reopen", f2.AppliedIndex())
	}
	if img3, _ := f2.Image(); img3.Digest() != want || img3.Index != 5 {
		t.Fatalf("reopened image index %d, digest changed %v", img3.Index, img3.Digest() != want)
	}
}

type bufSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { return nil }

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil || sink.cancelled {
		t.Fatalf("persist: %v", err)
	}
	return sink.Bytes()
}

func TestFSMSnapshotRestore(t *testing.T) {
	src := newTestFSM(t, t.TempDir())
	setup(t, src)
	applyAt(t, src, 5, Command{InitCluster: &InitCluster{ClusterID: "c1"}})
	applyAt(t, src, 6, Command{AllocateProducerIDs: &AllocateProducerIDs{Count: 7}})
	data := snapshotBytes(t, src)
	before, _ := src.Image()
	// Applying after Snapshot does not leak into the snapshot taken before.
	applyAt(t, src, 7, Command{DeleteTopic: &DeleteTopic{Name: "t"}})
	img, _ := src.Image()

	dst := newTestFSM(t, t.TempDir())
	applyAt(t, dst, 1, reg(9, "")) // stale state the restore must remove
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	got, _ := dst.Image()
	if got.Index != 6 || got.ClusterID != "c1" || got.Brokers[9] != nil || got.Topics.Get("t") == nil {
		t.Fatalf("restored image %+v", got)
	}
	if id := got.Topics.Get("t").ID; id == ([16]byte{}) || id != before.Topics.Get("t").ID {
		t.Fatalf("topic id %x after restore, %x before", id, before.Topics.Get("t").ID) // Kafka clients keep ids
	}
	applyAt(t, dst, 7, Command{DeleteTopic: &DeleteTopic{Name: "t"}})
	got, _ = dst.Image()
	if got.Digest() != img.Digest() {
		t.Fatal("digest differs after restore and the same log")
	}
	// A snapshot older than the applied state is ignored.
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if again, _ := dst.Image(); again != got {
		t.Fatal("old snapshot replaced newer state")
	}
	// Corruption is detected.
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xff
	dst2 := newTestFSM(t, t.TempDir())
	if err := dst2.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, errBadSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func TestPlacement(t *testing.T) {
	brokers := func(racks ...string) *Image {
		img := emptyImage()
		for i, r := range racks {
			img.Brokers[int32(i+1)] = &Broker{ID: int32(i + 1), Rack: r, State: BrokerAlive}
		}
		return img
	}
	tests := []struct {
		name string
		img  *Image
		n    int32
		rf   int16
		want [][]int32
		err  error
	}{
		{name: "single", img: brokers(""), n: 2, rf: 1, want: [][]int32{{1}, {1}}},
		{name: "no racks", img: brokers("", "", ""), n: 3, rf: 2, want: [][]int32{{1, 2}, {2, 3}, {3, 1}}},
		{name: "racks", img: brokers("a", "a", "b", "b"), n: 2, rf: 2, want: [][]int32{{1, 3}, {3, 2}}},
		{name: "uneven racks", img: brokers("a", "a", "a", "b"), n: 4, rf: 2, want: [][]int32{{1, 4}, {4, 2}, {2, 4}, {3, 4}}},
		{name: "too few", img: brokers("", ""), n: 1, rf: 3, err: ErrNotEnoughBrokers},
		{name: "zero partitions", img: brokers(""), n: 0, rf: 1, err: ErrInvalidPartitions},
		{name: "zero rf", img: brokers(""), n: 1, rf: 0, err: ErrInvalidPartitions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceReplicas(tc.img, tc.n, tc.rf)
			if !errors.Is(err, tc.err) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestPlacementSkipsFencedAndBalancesLeaders(t *testing.T) {
	img := emptyImage()
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &Broker{ID: id, State: BrokerAlive}
	}
	img.Brokers[2] = &Broker{ID: 2, State: BrokerFenced}
	img.Topics = img.Topics.With(&Topic{Name: "x", Partitions: []Partition{{Leader: 1, Replicas: []int32{1}}}})
	got, err := PlaceReplicas(img, 1, 1)
	if err != nil || !reflect.DeepEqual(got, [][]int32{{3}}) {
		t.Fatalf("got %v %v, want [[3]] (broker 1 already leads, 2 fenced)", got, err)
	}
}

// Applying a batch gives the same state and results as applying its entries
// one by one, rejected and already-applied entries included.
func TestFSMApplyBatchMatchesSingle(t *testing.T) {
	cmds := []Command{
		reg(1, ""), reg(2, ""),
		create("a", []int32{1, 2}),
		create("a", []int32{1}), // rejected: exists
		{AlterConfigs: &AlterConfigs{Topic: "a", Set: map[string]string{"x": "1"}}},
		{DeleteTopic: &DeleteTopic{Name: "nope"}}, // rejected
		{ChangePartition: &ChangePartition{Topic: "a", Leader: 2, ISR: []int32{2}}},
		{AllocateProducerIDs: &AllocateProducerIDs{Count: 3}},
		{ChangePartition: &ChangePartition{Topic: "a", Leader: 2, ISR: []int32{2}}}, // rejected: stale
	}
	var logs []*raft.Log
	for i, c := range cmds {
		c.Version = CommandVersion
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: data})
	}
	// A configuration entry in the middle gets a nil response.
	logs = append(logs[:3], append([]*raft.Log{{Index: 100, Type: raft.LogConfiguration}}, logs[3:]...)...)

	single := newTestFSM(t, t.TempDir())
	var want []any
	for _, l := range logs {
		want = append(want, single.Apply(l))
	}
	batch := newTestFSM(t, t.TempDir())
	got := batch.ApplyBatch(logs)
	for i := range logs {
		if isErr(want[i]) != isErr(got[i]) || (!isErr(want[i]) && !reflect.DeepEqual(want[i], got[i])) {
			t.Errorf("entry %d: batch %v, single %v", i, got[i], want[i])
		}
	}
	wi, _ := single.Image()
	gi, _ := batch.Image()
	if wi.Digest() != gi.Digest() || wi.Index != gi.Index || gi.Index != 9 {
		t.Fatalf("images differ: index %d/%d", gi.Index, wi.Index)
	}
	// Replaying the batch is a no-op: applied entries are skipped, and the
	// rejected one after the last applied index is rejected again.
	for i, r := range batch.ApplyBatch(logs) {
		if r != nil && (i != len(logs)-1 || !errors.Is(r.(error), ErrStaleEpoch)) {
			t.Fatalf("replay entry %d: %v", i, r)
		}
	}
	if again, _ := batch.Image(); again != gi {
		t.Fatal("replay published a new image")
	}
}

// A batch whose writes exceed one badger transaction is committed command by
// command, each with its own applied index.
func TestFSMApplyBatchTooBigForOneTransaction(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	setup(t, f)
	value := string(bytes.Repeat([]byte("x"), 30<<10)) // within maxConfigValueLen
	big := map[string]string{}
	for i := range 10 {
		big[fmt.Sprint("v", i)] = value
	}
	var logs []*raft.Log
	for i := range 12 { // 12 x 300 KiB, over the 2.4 MiB transaction limit
		name := fmt.Sprint("big", i)
		for _, c := range []Command{create(name, []int32{1}), {AlterConfigs: &AlterConfigs{Topic: name, Set: big}}} {
			c.Version = CommandVersion
			data, err := EncodeCommand(c)
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, &raft.Log{Index: uint64(len(logs) + 5), Type: raft.LogCommand, Data: data})
		}
	}
	if total := int64(12 * 10 * len(value)); total < f.db.MaxBatchSize() {
		t.Fatalf("%d bytes fit one transaction (%d): the fallback is not exercised", total, f.db.MaxBatchSize())
	}
	for i, r := range f.ApplyBatch(logs) {
		if isErr(r) {
			t.Fatalf("entry %d: %v", i, r)
		}
	}
	img, _ := f.Image()
	loaded, applied, err := loadImage(f.db)
	if err != nil || applied != uint64(len(logs)+4) || loaded.Digest() != img.Digest() || img.Topics.Len() != 13 {
		t.Fatalf("applied %d, %d topics, err %v, digests equal %v", applied, img.Topics.Len(), err, loaded.Digest() == img.Digest())
	}
}

func TestLastWrites(t *testing.T) {
	got := lastWrites([]write{{"a", []byte("1")}, {"b", []byte("1")}, {"a", nil}, {"c", []byte("1")}, {"b", []byte("2")}})
	want := []write{{"a", nil}, {"b", []byte("2")}, {"c", []byte("1")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Placement starts from the broker holding the fewest replicas.
func TestPlacementBalancesReplicas(t *testing.T) {
	img := emptyImage()
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &Broker{ID: id, State: BrokerAlive}
	}
	// Broker 3 leads one partition but 1 and 2 hold more replicas.
	img.Topics = img.Topics.With(&Topic{Name: "x", Partitions: []Partition{
		{Leader: 3, Replicas: []int32{3}},
		{Leader: 1, Replicas: []int32{1, 2}}, {Leader: 2, Replicas: []int32{2, 1}},
	}})
	got, err := PlaceReplicas(img, 1, 1)
	if err != nil || !reflect.DeepEqual(got, [][]int32{{3}}) {
		t.Fatalf("got %v %v, want [[3]]", got, err)
	}
}
