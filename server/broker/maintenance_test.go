package broker

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments/vfs"
)

// quietLogs makes a broker with n logs written once and then left alone
// for quietRounds maintenance rounds at now.
func quietLogs(t *testing.T, fsys vfs.FS, n int, now time.Time) *Broker {
	t.Helper()
	b := writtenLogs(t, t.TempDir(), fsys, n)
	t.Cleanup(func() { b.Close() })
	for range quietRounds + 1 {
		b.maintain(context.Background(), now)
	}
	if n := b.active.len(); n != 0 {
		t.Fatalf("%d logs active after %d rounds without a change, want 0", n, quietRounds+1)
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

// Idle open logs are maintained in turn (issue 19: every round ran every
// open log's Maintain, 300,000 of them): a round reaches its share of
// them, and every one within idleMaintainRounds rounds, here a segment.ms
// roll that time alone made due.
func TestIdleLogsMaintainedInTurn(t *testing.T) {
	const logs = 5 * idleMaintainRounds
	now := time.Now()
	b := quietLogs(t, vfs.OSFS(), logs, now)
	later := now.Add(8 * 24 * time.Hour) // past segment.ms: each active segment may roll
	b.maintain(context.Background(), later)
	if n := rolled(b); n != logs/idleMaintainRounds {
		t.Fatalf("one round past segment.ms rolled %d of %d idle logs, want its share %d", n, logs, logs/idleMaintainRounds)
	}
	for range idleMaintainRounds - 1 {
		b.maintain(context.Background(), later)
	}
	if n := rolled(b); n != logs {
		t.Fatalf("%d rounds past segment.ms rolled %d of %d idle logs, want all", idleMaintainRounds, n, logs)
	}
}

// A log changed is maintained the next round, not at its turn among the
// idle ones, and each round after until it has been quiet for quietRounds.
func TestChangedLogMaintainedNextRound(t *testing.T) {
	const logs = 5 * idleMaintainRounds
	now := time.Now()
	b := quietLogs(t, vfs.OSFS(), logs, now)
	// The log furthest from the turn of the idle ones.
	var p *Partition
	b.open.each(func(q *Partition) bool {
		if int(q.openSlot) == (b.rotation+logs/2)%logs {
			p = q
		}
		return p == nil
	})
	appendN(t, p, 1, "again")
	later := now.Add(8 * 24 * time.Hour)
	b.maintain(context.Background(), later)
	if !rolledLog(p) {
		t.Fatalf("a changed log past segment.ms not rolled by the next round")
	}
	for i := range quietRounds - 1 {
		if !b.active.has(p) {
			t.Fatalf("a changed log left the active ones %d rounds after its change, want %d", i+1, quietRounds)
		}
		b.maintain(context.Background(), later)
	}
	b.maintain(context.Background(), later)
	if b.active.has(p) {
		t.Fatalf("a log quiet for %d rounds still active", quietRounds)
	}
}

// A log that fails is reported by the storage loop's next look: one
// whose append failed at once, and an idle one whose failure a
// maintenance round met (here the fsync of the segment a segment.ms roll
// sealed) within idleMaintainRounds rounds.
func TestFailedLogsReported(t *testing.T) {
	const logs = 3 * idleMaintainRounds
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
	for range idleMaintainRounds {
		b.maintain(context.Background(), later)
	}
	if got := names(); fmt.Sprint(got) != "[gate-3 gate-7]" {
		t.Fatalf("failed logs %v after %d rounds past segment.ms with gate-7's fsyncs failing, want [gate-3 gate-7]", got, idleMaintainRounds)
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
