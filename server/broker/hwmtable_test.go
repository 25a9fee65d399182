package broker

import (
	"cmp"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
	"github.com/runnel/runnel/server/broker/hwcheckpoint"
)

// A mark that moves while a checkpoint is being written, after the write
// read the marks, is written by the next round; and the marks of a write
// that failed are written by the next round that succeeds. The checkpoint
// rounds look only at the marks that moved (issue 19), so neither may be
// lost from that set.
func TestCheckpointRoundWritesMarksMovedDuringOrSinceAFailedWrite(t *testing.T) {
	const logs = 4
	var during func()
	var fail atomic.Bool
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if op != vfs.OpSync || !strings.Contains(filepath.Base(path), hwmCheckpointFile) {
			return nil
		}
		if during != nil {
			f := during
			during = nil
			f()
		}
		if fail.Load() {
			return vfs.ErrInjected
		}
		return nil
	})
	dir := t.TempDir()
	b := writtenLogs(t, dir, efs, logs)
	defer b.Close()
	checkpointRound(t, b)
	part := func(i int32) *Partition {
		p, err := b.Partition("gate", i)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := func(what string, idx int32) {
		t.Helper()
		if got, mark := readCheckpoint(t, dir)[partitionDirName("gate", idx)], part(idx).hwm.Load(); got != mark {
			t.Fatalf("%s: checkpoint holds %d for gate-%d, its mark is %d", what, got, idx, mark)
		}
	}
	// Moved during the write: the file holds the mark before the move.
	appendN(t, part(0), 1, "before")
	during = func() { appendN(t, part(1), 1, "during") }
	checkpointRound(t, b)
	want("the round after the write a mark moved during", 0)
	if !b.hwmsChanged() {
		t.Fatal("a mark moved during the write: the checkpoint is not behind")
	}
	checkpointRound(t, b)
	want("the round after the write a mark moved during", 1)
	// A failed write.
	appendN(t, part(2), 1, "failed")
	fail.Store(true)
	if err := b.checkpointHWMs(); err == nil {
		t.Fatal("the checkpoint's write failed: no error")
	}
	fail.Store(false)
	if err := b.checkpointHWMs(); err != nil {
		t.Fatal(err)
	}
	want("the round after a failed write", 2)
	if b.hwmsChanged() {
		t.Fatal("every mark written: the checkpoint is behind")
	}
}

// The table the checkpoint keeps in order gives the file the sort of all
// marks gave (by topic name, then index; a run of one topic id a topic
// entry), whatever the order marks came and went in.
func TestMarkTableInFileOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"a", "b", "b-1", "c", "orders", "a.b", "Z"}
	for round := range 50 {
		table := newMarkTable()
		ref := map[partKey]savedMark{}
		for range 200 {
			k := partKey{names[rng.IntN(len(names))], int32(rng.IntN(20))}
			if rng.IntN(4) == 0 {
				table.update(k, func(s *markSlot) { s.saved, s.hasSaved = savedMark{}, false })
				delete(ref, k)
				continue
			}
			m := savedMark{[16]byte{byte(rng.IntN(2))}, rng.Int64N(1000)}
			table.update(k, func(s *markSlot) { s.saved, s.hasSaved = m, true })
			ref[k] = m
		}
		if got, want := table.checkpoint(), sortedCheckpoint(ref); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: table\n%v\nsorted marks\n%v", round, got, want)
		}
		if table.n != len(ref) {
			t.Fatalf("round %d: %d slots in use, %d marks", round, table.n, len(ref))
		}
	}
}

// sortedCheckpoint is marks as the checkpoint lists them, by a sort.
func sortedCheckpoint(marks map[partKey]savedMark) hwcheckpoint.Checkpoint {
	keys := slices.SortedFunc(func(yield func(partKey) bool) {
		for k := range marks {
			if !yield(k) {
				return
			}
		}
	}, func(x, y partKey) int {
		return cmp.Or(strings.Compare(x.topic, y.topic), cmp.Compare(x.index, y.index))
	})
	var cp hwcheckpoint.Checkpoint
	for _, k := range keys {
		m := marks[k]
		if n := len(cp); n == 0 || cp[n-1].Name != k.topic || cp[n-1].ID != m.id {
			cp = append(cp, hwcheckpoint.Topic{Name: k.topic, ID: m.id})
		}
		t := &cp[len(cp)-1]
		t.Partitions = append(t.Partitions, hwcheckpoint.Partition{Index: k.index, HighWatermark: m.hw})
	}
	return cp
}
