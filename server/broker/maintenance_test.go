package broker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// quietLogs makes a broker with n logs written once and maintained
// once since, at now.
func quietLogs(t *testing.T, fsys vfs.FS, n int, now time.Time) *Broker {
	t.Helper()
	b := writtenLogs(t, t.TempDir(), fsys, n)
	t.Cleanup(func() { b.Close() })
	if visited := b.maintain(context.Background(), now); visited != n {
		t.Fatalf("the round after %d logs were written maintained %d", n, visited)
	}
	if n := b.changed.len(); n != 0 {
		t.Fatalf("%d logs changed after a round without a change, want 0", n)
	}
	return b
}

// rolled counts the logs whose one segment rolled: sealed, and deleted by
// retention (writtenLogs' records are of 1970).
func rolled(b *Broker) (n int) {
	b.open.each(func(p *Partition) bool {
		if rolledLog(p) {
			n++
		}
		return true
	})
	return n
}

func rolledLog(p *Partition) bool { return p.log().Segments() > 1 || p.log().StartOffset() > 0 }

// An idle open log costs a round nothing until time makes something due
// (issue 19: every round ran every open log's Maintain, 300,000 of them,
// and later still a twelfth of them a round): here a segment.ms roll,
// which the round at that time makes in every log.
func TestIdleLogsMaintainedWhenDue(t *testing.T) {
	const logs = 60
	now := time.Now()
	b := quietLogs(t, vfs.OSFS(), logs, now)
	for at := time.Duration(0); at < maxMaintainWait; at += maxMaintainWait / 7 {
		if visited := b.maintain(context.Background(), now.Add(at)); visited != 0 {
			t.Fatalf("a round %v later, nothing due, maintained %d idle logs", at, visited)
		}
	}
	later := now.Add(8 * 24 * time.Hour) // past segment.ms: each active segment rolls
	if visited := b.maintain(context.Background(), later); visited != logs {
		t.Fatalf("the round past segment.ms maintained %d of %d idle logs", visited, logs)
	}
	if n := rolled(b); n != logs {
		t.Fatalf("the round past segment.ms rolled %d of %d idle logs, want all", n, logs)
	}
}

// A log changed is maintained the next round, and then not again until
// it changes or something is due.
func TestChangedLogMaintainedNextRound(t *testing.T) {
	const logs = 60
	now := time.Now()
	b := quietLogs(t, vfs.OSFS(), logs, now)
	var seen []*Partition
	b.onMaintained = func(p *Partition) { seen = append(seen, p) }
	p, err := b.Partition("gate", logs/2)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, p, 1, "again")
	b.maintain(context.Background(), now.Add(time.Second))
	if len(seen) != 1 || seen[0] != p {
		t.Fatalf("the round after one log changed maintained %d logs, want that one", len(seen))
	}
	seen = nil
	b.maintain(context.Background(), now.Add(2*time.Second))
	if len(seen) != 0 {
		t.Fatalf("the second round after a change maintained %d logs, want none", len(seen))
	}
}

// No log that can need maintenance is skipped, and none is maintained
// without a cause: over logs of several configurations (segment.ms,
// flush.ms, retention by time and by size, compaction), random appends of
// old and new records and random times, every round maintains each log
// changed since its last maintenance and each log Maintain has work for
// at that time (segments.Log.NextMaintain came), unless that log was
// still due right after a maintenance less than idleMaintainWait ago
// (compaction, retention by time of a sealed segment: its turn comes
// then, as an idle log's did); and it maintains no other log but those
// still due after their last maintenance idleMaintainWait ago and those
// maxMaintainWait unmaintained.
func TestMaintenanceNeverSkipsADueLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
	const perTopic = 3
	topics := map[string]map[string]string{
		"def":   {},
		"roll":  {"segment.ms": "3600000"},
		"flush": {"flush.ms": "1000"},
		"ret":   {"segment.ms": "1800000", "retention.ms": "3600000"},
		"bytes": {"segment.ms": "1200000", "retention.bytes": "300"},
		"cmp":   {"cleanup.policy": "compact", "segment.ms": "1800000"},
	}
	now := time.Now()
	clock := func() time.Time { return now }
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(256),
		Logger: slog.New(slog.DiscardHandler), Now: clock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ts []*raftfsm.Topic
	id := byte(1)
	for name, cfgs := range topics {
		ts = append(ts, lazyTopic(name, id, perTopic, cfgs))
		id++
	}
	if err := b.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(ts...)}); err != nil {
		t.Fatal(err)
	}
	type state struct {
		changed   bool      // appended to since its last maintenance
		last      time.Time // its last maintenance
		stillDue  bool      // due right after it
		maintains int
	}
	var parts []*Partition
	model := map[*Partition]*state{}
	for name := range topics {
		for i := range perTopic {
			p, err := b.Partition(name, int32(i))
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p)
			model[p] = &state{changed: true} // opened: a change
		}
	}
	visited := map[*Partition]bool{}
	b.onMaintained = func(p *Partition) {
		if visited[p] {
			t.Errorf("%s-%d maintained twice in a round", p.topic, p.index)
		}
		visited[p] = true
	}
	const hour = int64(time.Hour / time.Millisecond)
	rounds := 0
	for step := range 300 {
		switch rng.IntN(6) {
		case 0, 1:
			p := parts[rng.IntN(len(parts))]
			ts := now.UnixMilli() - rng.Int64N(3*hour)
			if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Key: []byte{byte(rng.IntN(3))}, Value: []byte("v"), Timestamp: ts}})); err != nil {
				t.Fatal(err)
			}
			model[p].changed = true
		case 2:
			now = now.Add(time.Duration(rng.Int64N(int64(20 * time.Minute))))
		default:
			rounds++
			type expect struct{ must, may bool }
			want := map[*Partition]expect{}
			for _, p := range parts {
				st := model[p]
				due := !now.Before(p.log().NextMaintain())
				waited := now.Sub(st.last)
				must := st.changed || due && !(st.stillDue && waited < idleMaintainWait)
				want[p] = expect{must, must || st.stillDue && waited >= idleMaintainWait || waited >= maxMaintainWait}
			}
			clear(visited)
			b.maintain(context.Background(), now)
			for _, p := range parts {
				st, w := model[p], want[p]
				if w.must && !visited[p] {
					t.Fatalf("step %d: %s-%d skipped: changed %v, due at +%v, last maintained %v ago, still due then %v",
						step, p.topic, p.index, st.changed, p.log().NextMaintain().Sub(now), now.Sub(st.last), st.stillDue)
				}
				if visited[p] && !w.may {
					t.Fatalf("step %d: %s-%d maintained without a cause: due at +%v, last maintained %v ago",
						step, p.topic, p.index, p.log().NextMaintain().Sub(now), now.Sub(st.last))
				}
				if visited[p] {
					st.changed, st.last, st.maintains = false, now, st.maintains+1
					st.stillDue = !now.Before(p.log().NextMaintain())
				}
			}
		}
	}
	// The run tested what it means to: logs maintained for time alone.
	for _, p := range parts {
		if model[p].maintains < 2 {
			t.Fatalf("%s-%d maintained %d times in %d rounds", p.topic, p.index, model[p].maintains, rounds)
		}
	}
}

// A log that fails is reported by the storage loop's next look: one
// whose append failed at once, and an idle one whose failure a
// maintenance round met (here the fsync of the segment a segment.ms roll
// sealed) by that round's end.
func TestFailedLogsReported(t *testing.T) {
	const logs = 36
	var failing atomic.Value
	failing.Store("")
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, path string) error {
		if f := failing.Load().(string); f != "" && strings.Contains(path, "/"+f+"/") && (op == vfs.OpSync || op == vfs.OpWrite) {
			return vfs.ErrInjected
		}
		return nil
	})
	now := time.Now()
	b := quietLogs(t, efs, logs, now)
	names := func() (out []string) {
		for _, r := range b.failedPartitions() {
			out = append(out, fmt.Sprintf("%s-%d", r.Topic(), r.Index()))
		}
		return out
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("failed logs %v before any failure", got)
	}
	// An append that fails.
	failing.Store("gate-3")
	p, err := b.Partition("gate", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("x"), Timestamp: 1}})); err == nil {
		t.Fatal("append with its writes failing: no error")
	}
	if got := names(); fmt.Sprint(got) != "[gate-3]" {
		t.Fatalf("failed logs %v after gate-3's append failed, want [gate-3]", got)
	}
	// An idle log's roll whose flush fails.
	failing.Store("gate-7")
	later := now.Add(8 * 24 * time.Hour)
	b.maintain(context.Background(), later)
	if got := names(); fmt.Sprint(got) != "[gate-3 gate-7]" {
		t.Fatalf("failed logs %v after a round past segment.ms with gate-7's fsyncs failing, want [gate-3 gate-7]", got)
	}
	// Recovered: no longer listed.
	failing.Store("")
	for _, r := range b.failedPartitions() {
		if err := r.Recover(); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("failed logs %v after they recovered", got)
	}
}
