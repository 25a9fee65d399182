package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// checkpointRound is a maintenance round and a round of the checkpoint
// loop, as Start's goroutines run them.
func checkpointRound(t *testing.T, b *Broker) {
	t.Helper()
	b.maintain(context.Background(), time.Now())
	if err := b.checkpointHWMs(); err != nil {
		t.Fatal(err)
	}
}

// appendN appends n one-record batches to p as its leader.
func appendN(t testing.TB, p *Partition, n int, value string) {
	t.Helper()
	for i := range n {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: fmt.Appendf(nil, "%s%d", value, i), Timestamp: time.Now().UnixMilli()}})); err != nil {
			t.Fatal(err)
		}
	}
}

// hwImage places topic "hw" (id 9) here with parts partitions led by
// this broker (1) with isr as its in-sync replicas.
func hwImage(parts int, isr ...int32) *raftfsm.Image {
	t := lazyTopic("hw", 9, parts, map[string]string{})
	for i := range t.Partitions {
		t.Partitions[i].Replicas = []int32{1, 2}
		t.Partitions[i].ISR = isr
	}
	return &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(t)}
}

// crashRestart starts a broker on dir without closing b, as after kill
// -9 (b is left as it is: nothing closes its logs or writes for it), with
// img applied.
func crashRestart(t *testing.T, dir string, img *raftfsm.Image) *Broker {
	t.Helper()
	b := lazyTestBroker(t, dir)
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	return b
}

func hwOf(t *testing.T, b *Broker, idx int32) int64 {
	t.Helper()
	p, err := b.Partition("hw", idx)
	if err != nil {
		t.Fatal(err)
	}
	return p.hwm.Load()
}

// TestCheckpointRoundFsyncsOnce (issue 19): after a write to each of many
// partitions, a maintenance round and a checkpoint round make every high
// watermark durable with O(1) fsyncs: one file and its directory. Each
// round wrote each changed mark to its partition's own file before (a
// temporary file, an fsync, a rename, a directory fsync: 80 fsyncs for 40
// partitions), the largest steady fsync cost at 30,000 active partitions.
// A round after which no mark moved writes nothing.
func TestCheckpointRoundFsyncsOnce(t *testing.T) {
	const logs = 40
	var counting atomic.Bool
	var fsyncs atomic.Int64
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, _ string) error {
		if counting.Load() && (op == vfs.OpSync || op == vfs.OpSyncDir) {
			fsyncs.Add(1)
		}
		return nil
	})
	b := writtenLogs(t, t.TempDir(), efs, logs)
	defer b.Close()
	counting.Store(true)
	checkpointRound(t, b)
	if n := fsyncs.Swap(0); n > 2 {
		t.Fatalf("a round after writes to %d partitions: %d fsyncs, want at most 2", logs, n)
	}
	checkpointRound(t, b)
	if n := fsyncs.Swap(0); n != 0 {
		t.Fatalf("a round after no mark moved: %d fsyncs, want 0", n)
	}
	for i := range logs {
		p, _ := b.Partition("gate", int32(i))
		appendN(t, p, 1, "again")
	}
	checkpointRound(t, b)
	if n := fsyncs.Swap(0); n > 2 {
		t.Fatalf("a second round after writes to %d partitions: %d fsyncs, want at most 2", logs, n)
	}
}

// TestHighWatermarksSurviveRestart: the marks checkpointed come back after
// a crash, and a broker that opened only some of its logs keeps the saved
// marks of the others in each checkpoint it writes.
func TestHighWatermarksSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	img := hwImage(3, 1)
	b := crashRestart(t, dir, img)
	for i := range 3 {
		p, _ := b.Partition("hw", int32(i))
		appendN(t, p, i+1, "a")
	}
	checkpointRound(t, b)
	b = crashRestart(t, dir, img)
	p, _ := b.Partition("hw", 0) // the only one opened
	appendN(t, p, 1, "b")
	checkpointRound(t, b)
	b = crashRestart(t, dir, img)
	defer b.Close()
	for i, want := range []int64{2, 2, 3} {
		if hw := hwOf(t, b, int32(i)); hw != want {
			t.Errorf("hw-%d: high watermark %d after two restarts, want %d", i, hw, want)
		}
	}
}

// legacyLine is the previous release's per-partition checkpoint.
func legacyLine(hw int64) []byte { return fmt.Appendf(nil, "%d %d\n", hw, legacyHWMChecksum(hw)) }

// TestHighWatermarkUpgradeFromPerPartitionFiles: a data directory of the
// previous release, a high-watermark file in each partition directory and
// no directory checkpoint, opens with those marks; each file is removed
// once the directory checkpoint holding its log's mark is written, and
// the marks of the logs not opened yet stay in theirs.
func TestHighWatermarkUpgradeFromPerPartitionFiles(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "partitions")
	img := hwImage(3, 1, 2) // the marks stay as saved: no follower fetches
	b := crashRestart(t, dir, hwImage(3, 1))
	for i := range 3 {
		p, _ := b.Partition("hw", int32(i))
		appendN(t, p, 5, "a")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parts, hwmCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(parts, partitionDirName("hw", int32(i)), legacyHWMFile), legacyLine(int64(i+2)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b = crashRestart(t, dir, img)
	for i := range 2 {
		if hw := hwOf(t, b, int32(i)); hw != int64(i+2) {
			t.Fatalf("hw-%d: high watermark %d from the previous release's file, want %d", i, hw, i+2)
		}
	}
	checkpointRound(t, b)
	for i, kept := range []bool{false, false, true} {
		_, err := os.Stat(filepath.Join(parts, partitionDirName("hw", int32(i)), legacyHWMFile))
		if kept != (err == nil) {
			t.Errorf("hw-%d: previous release's file kept %v after the checkpoint, want %v (%v)", i, err == nil, kept, err)
		}
	}
	b = crashRestart(t, dir, img)
	defer b.Close()
	for i := range 3 {
		if hw := hwOf(t, b, int32(i)); hw != int64(i+2) {
			t.Errorf("hw-%d: high watermark %d after the upgrade and a restart, want %d", i, hw, i+2)
		}
	}
}

// TestLoweredHighWatermarkNotExceededAfterRestart: a follower that cut
// its log below its checkpointed mark (it diverged from a new leader) and
// then took the new leader's records in place of the cut ones must not
// find the old mark after a crash: those records are not known to be
// replicated, and this replica may lead next. The cut mark is written
// before the truncation returns, with no checkpoint round between.
func TestLoweredHighWatermarkNotExceededAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b := crashRestart(t, dir, hwImage(1, 1))
	p, _ := b.Partition("hw", 0)
	appendN(t, p, 3, "a")
	checkpointRound(t, b)
	if hw := p.hwm.Load(); hw != 3 {
		t.Fatalf("high watermark %d, want 3", hw)
	}
	p.leader.Store(2) // now a follower of broker 2, which holds other records
	if err := p.truncateAsFollower(0, p.leaderEpoch.Load()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.log().AppendReplicated(recordbatch.Build([]recordbatch.NewRecord{
		{Value: []byte("x"), Timestamp: 2}, {Value: []byte("y"), Timestamp: 2}, {Value: []byte("z"), Timestamp: 2}, {Value: []byte("w"), Timestamp: 2}})); err != nil {
		t.Fatal(err)
	}
	b = crashRestart(t, dir, hwImage(1, 1, 2)) // leads again; broker 2 in sync but not fetched yet
	defer b.Close()
	if hw := hwOf(t, b, 0); hw != 0 {
		t.Fatalf("high watermark %d after the crash, want 0: the records at 0-3 are the new leader's, not known replicated", hw)
	}
}

// TestOpenBelowSavedMarkLowersIt: a log that opens shorter than its saved
// mark (a power cut lost its tail) has the mark lowered in the checkpoint
// before it is used: records appended in place of the lost ones are not
// exposed after another crash.
func TestOpenBelowSavedMarkLowersIt(t *testing.T) {
	dir := t.TempDir()
	b := crashRestart(t, dir, hwImage(1, 1))
	p, _ := b.Partition("hw", 0)
	appendN(t, p, 3, "a")
	checkpointRound(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := segments.Open(filepath.Join(dir, "partitions", partitionDirName("hw", 0)), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(1); err != nil { // the tail the power cut lost
		t.Fatal(err)
	}
	l.Close()
	img := hwImage(1, 1, 2)
	b = crashRestart(t, dir, img)
	if hw := hwOf(t, b, 0); hw != 1 {
		t.Fatalf("high watermark %d at open, want the log end 1", hw)
	}
	p, _ = b.Partition("hw", 0)
	appendN(t, p, 3, "b") // not replicated: broker 2 never fetched them
	b = crashRestart(t, dir, img)
	defer b.Close()
	if hw := hwOf(t, b, 0); hw != 1 {
		t.Fatalf("high watermark %d after a crash, want 1", hw)
	}
}

// TestDeletedPartitionsLeaveTheCheckpoint: the marks of a deleted topic's
// partitions, and at a start those of partitions no longer placed here,
// are not written again.
func TestDeletedPartitionsLeaveTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	keep, gone := lazyTopic("keep", 1, 2, map[string]string{}), lazyTopic("gone", 2, 2, map[string]string{})
	b := crashRestart(t, dir, &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(keep, gone)})
	for _, topic := range []string{"keep", "gone"} {
		for i := range 2 {
			p, _ := b.Partition(topic, int32(i))
			appendN(t, p, 1, "a")
		}
	}
	checkpointRound(t, b)
	if err := b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(keep)}); err != nil {
		t.Fatal(err)
	}
	b.waitDeletions()
	checkpointRound(t, b)
	marks := readCheckpoint(t, dir)
	if len(marks) != 2 || marks["keep-0"] != 1 || marks["keep-1"] != 1 {
		t.Fatalf("checkpoint after deleting topic gone: %v, want keep-0 and keep-1 at 1", marks)
	}
	b = crashRestart(t, dir, &raftfsm.Image{Index: 4, Topics: raftfsm.TopicMapOf(lazyTopic("keep", 3, 2, map[string]string{}))})
	defer b.Close()
	b.retainHostedHWMs() // as Start does: keep was deleted and created again while this node was down
	if err := b.checkpointHWMs(); err != nil {
		t.Fatal(err)
	}
	if marks := readCheckpoint(t, dir); len(marks) != 0 {
		t.Fatalf("checkpoint after a start with another topic keep: %v, want none", marks)
	}
}

// readCheckpoint is the partitions directory's checkpoint as
// "topic-partition" to mark.
func readCheckpoint(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	var logs bytes.Buffer
	c := loadHWMCheckpoint(vfs.OSFS(), filepath.Join(dir, "partitions"), slog.New(slog.NewTextHandler(&logs, nil)))
	if logs.Len() > 0 {
		t.Fatalf("checkpoint unreadable: %s", logs.String())
	}
	out := map[string]int64{}
	for k, m := range c.savedMarks() {
		out[partitionDirName(k.topic, k.index)] = m.hw
	}
	return out
}

// TestCorruptCheckpointFallsBack: a checkpoint that does not decode is
// warned about, each log opens with its mark at its log start, and the
// next round writes a whole checkpoint again.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	dir := t.TempDir()
	b := crashRestart(t, dir, hwImage(1, 1))
	p, _ := b.Partition("hw", 0)
	appendN(t, p, 3, "a")
	checkpointRound(t, b)
	path := filepath.Join(dir, "partitions", hwmCheckpointFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x10
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	b, err = New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(16), Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !bytes.Contains(logs.Bytes(), []byte("high-watermark checkpoint unreadable")) {
		t.Fatalf("no warning about the corrupt checkpoint: %q", logs.String())
	}
	if err := b.Reconcile(hwImage(1, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if hw := hwOf(t, b, 0); hw != 0 {
		t.Fatalf("high watermark %d with a corrupt checkpoint, want the log start 0", hw)
	}
	if err := b.checkpointHWMs(); err != nil {
		t.Fatal(err)
	}
	if marks := readCheckpoint(t, dir); len(marks) != 1 || marks["hw-0"] != 0 {
		t.Fatalf("checkpoint rewritten: %v, want hw-0 at 0", marks)
	}
}

// TestCheckpointPowerCutAtEveryStep: a power cut at any step of a
// checkpoint write (every filesystem operation of it failing from that
// step on, then a crash that keeps what was synced and a random part of
// the rest) leaves the old checkpoint or the new one, whole.
func TestCheckpointPowerCutAtEveryStep(t *testing.T) {
	const dir = "/data/partitions"
	marks := func(base int64) map[partKey]savedMark {
		m := map[partKey]savedMark{}
		for i := range int32(50) {
			m[partKey{"t", i}] = savedMark{[16]byte{7}, base + int64(i)}
		}
		return m
	}
	oldMarks, newMarks := marks(100), marks(5000)
	write := func(fsys vfs.FS, m map[partKey]savedMark) error {
		c := &hwmCheckpoint{fs: fsys, dir: dir, logger: slog.New(slog.DiscardHandler), table: newMarkTable()}
		for k, mark := range m {
			c.setMark(k.topic, k.index, mark)
		}
		b := &Broker{hwms: c, dir: dir, logger: c.logger, logOpts: segments.Options{FS: fsys}}
		return b.syncLoweredHWMs()
	}
	var steps atomic.Int64
	failFrom := int64(-1)
	inject := func(vfs.Op, string) error {
		if n := steps.Add(1); failFrom >= 0 && n > failFrom {
			return vfs.ErrInjected
		}
		return nil
	}
	base := vfs.NewMemFS()
	if err := base.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := write(base, oldMarks); err != nil {
		t.Fatal(err)
	}
	if err := write(vfs.NewErrorFS(base.Crash(rand.New(rand.NewPCG(1, 1))), inject), newMarks); err != nil {
		t.Fatal(err)
	}
	total := steps.Load()
	for failFrom = 0; failFrom <= total; failFrom++ {
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, uint64(failFrom)))
			mem := base.Crash(rng) // only the old checkpoint, durable
			steps.Store(0)
			err := write(vfs.NewErrorFS(mem, inject), newMarks)
			after := mem.Crash(rng)
			c := loadHWMCheckpoint(after, dir, slog.New(slog.DiscardHandler))
			switch {
			case c.changed != 0:
				t.Fatalf("power cut after %d of %d steps (seed %d): checkpoint unreadable", failFrom, total, seed)
			case fmt.Sprint(c.savedMarks()) == fmt.Sprint(newMarks):
			case fmt.Sprint(c.savedMarks()) == fmt.Sprint(oldMarks):
				if err == nil {
					t.Fatalf("power cut after %d of %d steps (seed %d): the write returned nil but the old checkpoint is back", failFrom, total, seed)
				}
			default:
				t.Fatalf("power cut after %d of %d steps (seed %d): checkpoint holds %v", failFrom, total, seed, c.savedMarks())
			}
		}
	}
}
