package broker

import (
	"errors"
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

// newSlowCreates holds creations until release is called (once or more).
func newSlowCreates() (s *slowCreates, release func()) {
	s = &slowCreates{release: make(chan struct{}), changed: make(chan struct{}, 1)}
	var once sync.Once
	return s, func() { once.Do(func() { close(s.release) }) }
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
	leader, write := fakeLeaderOf(t, n)
	slow, release := newSlowCreates()
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

	// t-0 gets a record: its log is created (nothing holds it) and it
	// replicates.
	write(0)
	waitFollowerEnd(t, follower(0), 1, "before any creation was held")
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
	waitFollowerEnd(t, follower(0), 2, "while the other logs' creations were held")
	deadline := time.Now().Add(20 * time.Second)
	for slow.mostHeld() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if most := slow.mostHeld(); most < 2 {
		t.Errorf("at most %d log creation at once, want several", most)
	}
	release()
	for i := range int32(n) {
		waitFollowerEnd(t, follower(i), leader.others[i].log().EndOffset(), "after the creations were let through")
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

// A follower back from a restart applies what it fetched of the logs it
// has open while it still opens the others: the opens of the logs it must
// check against their leader went on the pool that applies answers, ahead
// of every apply, so after a restart at 100,000 partitions hardly a
// partition was back in sync until the last of its logs was open (issue
// 19: 5,000 in the first 27 s, then 95,000 in 14 s). Here every log but
// t-0's holds a record from before the restart, and the opening of each is
// held: more than the pool's workers. t-0, empty at the restart, gets its
// first record meanwhile, and must have it.
func TestFollowerAppliesWhileOpeningLogs(t *testing.T) {
	const n = replicaApplyWorkers + 5
	leader, write := fakeLeaderOf(t, n)
	dir := t.TempDir()
	b := followingBroker(t, leader, n, Config{DataDir: dir, Files: segments.NewFileCache(64)})
	for i := 1; i < n; i++ {
		write(i)
	}
	for i := int32(1); i < n; i++ {
		p, err := b.Hosted("t", i)
		if err != nil {
			t.Fatal(err)
		}
		waitFollowerEnd(t, p, 1, "before the restart")
	}
	b.Close()

	slow, release := newSlowCreates()
	b = followingBroker(t, leader, n, Config{DataDir: dir, Files: segments.NewFileCache(64), FS: vfs.NewErrorFS(vfs.OSFS(), slow.inject)})
	defer b.Close()
	defer release() // before the broker closes: its pool may be held
	deadline := time.Now().Add(20 * time.Second)
	for slow.mostHeld() < replicaApplyWorkers && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if most := slow.mostHeld(); most < replicaApplyWorkers {
		t.Fatalf("%d log opens held at once, want %d (the pool's workers)", most, replicaApplyWorkers)
	}
	write(0)
	p0, err := b.Hosted("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFollowerEnd(t, p0, 1, "while the other logs' opens were held")
	release()
	for i := int32(1); i < n; i++ {
		p, err := b.Hosted("t", i)
		if err != nil {
			t.Fatal(err)
		}
		waitFollowerEnd(t, p, 1, "after the opens were let through")
	}
}

// waitFollowerEnd waits until the follower's p has its log open and ending
// at end.
func waitFollowerEnd(t *testing.T, p *Partition, end int64, what string) {
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

// fakeLeaderOf is a fake leader (broker 2) of partitions t-0 to t-(n-1),
// and a write of one record to its partition i.
func fakeLeaderOf(t *testing.T, n int) (leader *fakeLeader, write func(i int)) {
	t.Helper()
	leader = &fakeLeader{}
	for i := range int32(n) {
		lp := epochTestPartitionAt(t, i, 2)
		lp.setMeta(raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}}, 2)
		leader.others = append(leader.others, lp)
	}
	leader.p = leader.others[0]
	return leader, func(i int) {
		t.Helper()
		if _, err := leader.others[i].append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
}

// A round whose applies run late leaves its answer to them, and a later
// round reads into it once every one of them has reported back, never
// before (issue 19: in a burst every round left its answer, and each
// decoded into new arrays); at most maxRetiredAnswers wait so.
func TestNextAnswerReusesRetiredOnesOnceDone(t *testing.T) {
	f := &leaderFetcher{}
	running := func(a *fetchAnswer, applies int) {
		a.done, a.pending = make(chan error, applies), applies
	}
	a1 := f.nextAnswer()
	running(a1, 2)
	a2 := f.nextAnswer()
	if a2 == a1 {
		t.Fatal("the answer of two running applies was read into")
	}
	running(a2, 1)
	a1.done <- nil // one of a1's two
	a3 := f.nextAnswer()
	if a3 == a1 || a3 == a2 {
		t.Fatal("an answer with an apply still running was read into")
	}
	running(a3, 1)
	a1.done <- errors.New("late") // a1's last
	if a4 := f.nextAnswer(); a4 != a1 || a1.pending != 0 || len(a1.done) != 0 {
		t.Fatalf("got %p (a1 %p) with %d pending, %d results queued: want a1, drained", a4, a1, a1.pending, len(a1.done))
	}
	if a := f.nextAnswer(); a != a1 {
		t.Fatal("the last answer, done, was not read into again")
	}
	for range 2 * maxRetiredAnswers {
		running(f.nextAnswer(), 1)
	}
	if len(f.retired) > maxRetiredAnswers {
		t.Fatalf("%d answers kept for their late applies, at most %d", len(f.retired), maxRetiredAnswers)
	}
}
