package broker

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
)

// slowCreates is a filesystem fault that holds the creation of every
// partition directory but t-0's until release is closed, and counts the
// creations held at once.
type slowCreates struct {
	release chan struct{}
	mu      sync.Mutex
	held    int // creations waiting now
	most    int // the most held at once
	changed chan struct{}
}

func (s *slowCreates) inject(op vfs.Op, path string) error {
	if op != vfs.OpMkdir || filepath.Base(path) == "t-0" || filepath.Base(filepath.Dir(path)) != "partitions" {
		return nil
	}
	s.mu.Lock()
	s.held++
	s.most = max(s.most, s.held)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	<-s.release
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
	return nil
}

func (s *slowCreates) mostHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// A follower creates the logs of the partitions whose first records it
// fetched off its fetch loop, several at once: the loop created them one
// after the other, fetching nothing from that leader meanwhile (issue 19:
// the first record written to each of 30,000 partitions took 58 s, and the
// followers fell out of every ISR of their leaders while creating logs).
// Here the creation of every log but t-0's is held: t-0, already
// replicating, must go on replicating, and more than one creation must be
// under way at once.
func TestFollowerFetchesOnWhileCreatingLogs(t *testing.T) {
	const n = 6
	leader := &fakeLeader{}
	for i := range int32(n) {
		lp := epochTestPartitionAt(t, i, 2)
		lp.setMeta(raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}, 2)
		leader.others = append(leader.others, lp)
	}
	leader.p = leader.others[0]
	write := func(i int) {
		t.Helper()
		if _, err := leader.others[i].append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	slow := &slowCreates{release: make(chan struct{}), changed: make(chan struct{}, 1)}
	released := false
	release := func() {
		if !released {
			released = true
			close(slow.release)
		}
	}
	dir := t.TempDir()
	b := followingBroker(t, leader, n, Config{DataDir: dir, Files: segments.NewFileCache(64), FS: vfs.NewErrorFS(vfs.OSFS(), slow.inject)})
	defer b.Close()
	defer release() // before the broker closes: its fetch loop may be held
	follower := func(i int32) *Partition {
		p, err := b.Hosted("t", i)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitEnd := func(p *Partition, end int64, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if log := p.log(); log != nil && log.EndOffset() == end {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: follower's t-%d never reached offset %d", what, p.index, end)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// t-0 gets a record: its log is created (nothing holds it) and it
	// replicates.
	write(0)
	waitEnd(follower(0), 1, "before any creation was held")
	// Every other partition gets its first record: their creations are
	// held.
	for i := 1; i < n; i++ {
		write(i)
	}
	select {
	case <-slow.changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no log creation started")
	}
	// Meanwhile t-0 gets another record.
	write(0)
	waitEnd(follower(0), 2, "while the other logs' creations were held")
	deadline := time.Now().Add(20 * time.Second)
	for slow.mostHeld() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if most := slow.mostHeld(); most < 2 {
		t.Errorf("at most %d log creation at once, want several", most)
	}
	release()
	for i := range int32(n) {
		waitEnd(follower(i), leader.others[i].log().EndOffset(), "after the creations were let through")
	}
}

// testFetchManager is a fetch manager for tests that drive its fetchers'
// rounds themselves: each round waits for all its applies, so a test sees
// an answer applied once fetch returns.
func testFetchManager(t testing.TB, self int32) *fetchManager {
	m := newFetchManager(self, nil, nil, slog.New(slog.DiscardHandler))
	m.applyWait = time.Hour
	t.Cleanup(m.close)
	return m
}
