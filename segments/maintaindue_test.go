package segments

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// maintainState is what a Maintain pass can change in a log.
type maintainState struct {
	Segs                  []string // base:size
	Start, End, RP, Saved int64
	SavedAt               time.Time
	Unflushed             int64
	Unsealed              int
	Epochs                string
	Err                   error
}

func maintainStateOf(l *Log) maintainState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := maintainState{Start: l.start, End: l.end, RP: l.recoveryPoint, Saved: l.savedRP, SavedAt: l.savedAt,
		Unflushed: l.unflushed, Unsealed: len(l.unsealed), Epochs: fmt.Sprint(l.epochs), Err: l.err}
	for _, s := range l.segs {
		st.Segs = append(st.Segs, fmt.Sprintf("%d:%d", s.base, s.size))
	}
	return st
}

// Maintain skips its full pass only when that pass would change nothing
// (issue 19: a broker maintains every log written in the last minute each
// round, and nearly all have nothing due): over random configurations
// (segment.ms, flush.ms, retention by time and size, compaction), appends
// of old and new records, rolls, DeleteRecords, truncations and fsyncs,
// and random times, whenever maintainDueLocked says no, the full pass
// leaves the log as it was, and so it does at any time before
// NextMaintain.
func TestMaintainDue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const hour = int64(time.Hour / time.Millisecond)
	skipped := 0
	for run := range 300 {
		cfg := DefaultConfig()
		cfg.SegmentBytes = []int64{1024, 64 << 10}[rng.IntN(2)]
		cfg.SegmentMs = []int64{hour, cfg.SegmentMs}[rng.IntN(2)]
		cfg.FlushMs = []int64{1000, cfg.FlushMs}[rng.IntN(2)]
		cfg.RetentionMs = []int64{hour, -1}[rng.IntN(2)]
		cfg.RetentionBytes = []int64{2048, -1}[rng.IntN(2)]
		cfg.RescanBytes = []int64{1, cfg.RescanBytes}[rng.IntN(2)]
		cfg.CleanupPolicy = []string{"delete", "delete", "compact", "compact,delete"}[rng.IntN(4)]
		l := mustOpen(t, fmt.Sprintf("/d/%d", run), cfg, Options{FS: vfs.NewMemFS()})
		base := time.Now()
		now := base
		epoch := int32(0)
		for step := range 40 {
			switch rng.IntN(8) {
			case 0, 1, 2:
				ts := now.UnixMilli() - rng.Int64N(3*hour)
				if rng.IntN(4) == 0 {
					epoch++
				}
				mustAppend(t, l, valueBatch(1+rng.IntN(3), 100, ts), epoch)
			case 3:
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			case 4:
				if err := l.DeleteRecordsBefore(l.StartOffset() + rng.Int64N(l.EndOffset()-l.StartOffset()+1)); err != nil {
					t.Fatal(err)
				}
			case 5:
				if end := l.EndOffset(); end > l.StartOffset() {
					if err := l.Truncate(end - 1); err != nil {
						t.Fatal(err)
					}
				}
			case 6:
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
			case 7:
				now = now.Add(time.Duration(rng.Int64N(int64(2 * time.Hour))))
			}
			// At any time before NextMaintain, as at now when it is
			// not due, the full pass changes nothing (a broker visits
			// an unchanged log only then).
			if next := l.NextMaintain(); next.After(now) {
				at := now.Add(time.Duration(rng.Int64N(int64(min(next.Sub(now), 3*time.Hour)))))
				before := maintainStateOf(l)
				if err := l.maintainAll(at); err != nil {
					t.Fatalf("run %d step %d: %v", run, step, err)
				}
				if after := maintainStateOf(l); !reflect.DeepEqual(before, after) {
					t.Fatalf("run %d step %d (%+v): at +%v, before NextMaintain +%v, the full pass changed\n%+v\nto\n%+v",
						run, step, cfg, at.Sub(now), next.Sub(now), before, after)
				}
			}
			l.mu.Lock()
			due := l.maintainDueLocked(now)
			l.mu.Unlock()
			if !due {
				skipped++
				before := maintainStateOf(l)
				if err := l.maintainAll(now); err != nil {
					t.Fatalf("run %d step %d: %v", run, step, err)
				}
				if after := maintainStateOf(l); !reflect.DeepEqual(before, after) {
					t.Fatalf("run %d step %d (%+v): nothing due, but the full pass changed\n%+v\nto\n%+v", run, step, cfg, before, after)
				}
			} else if err := l.Maintain(now); err != nil {
				t.Fatalf("run %d step %d: %v", run, step, err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("skipped %d", skipped)
	if skipped < 100 {
		t.Fatalf("nothing due only %d times: the test did not test the skip", skipped)
	}
}
