package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// A follower's fetch session holds partitions it does not list: an
// incremental fetch that leaves one out says the follower is still where
// the session has it (KIP-227). The leader no longer reads those idle
// partitions at each fetch (issue 19), so it learns from the session's
// watch that the follower is still caught up: a follower whose session
// keeps fetching at the log end stays in sync however long the partition
// is idle; one behind, one whose session stopped fetching or ended, and
// one whose session dropped the partition fall out after the lag budget.
func TestIdleSessionKeepsFollowerInSync(t *testing.T) {
	const lagMax = 10 * time.Second
	p := isrLeader(t, []int32{1, 2, 3}, 5)
	fetched(t, p, 2, 5)
	fetched(t, p, 3, 5)
	start := time.Now()
	later := start.Add(3 * lagMax)
	wantISR := func(want ...int32) {
		t.Helper()
		isr, _, _ := p.wantedISR(later, lagMax)
		if !slices.Equal(isr, want) {
			t.Fatalf("wanted ISR %v, want %v", isr, want)
		}
	}
	wantISR(1) // nobody fetched since: both fell behind

	clock := new(kapi.FetchClock)
	w := kapi.NewWatch(func() {}, 2, clock)
	w.SetPosition(5)
	p.Watch(w)
	clock.Tick(later.Add(-time.Second)) // the session fetched a second ago
	wantISR(1, 2)

	// The session's clock says nothing for another follower.
	other := kapi.NewWatch(func() {}, 3, new(kapi.FetchClock))
	other.SetPosition(5)
	p.Watch(other)
	wantISR(1, 2)

	// Records appended: a session still at 5 is behind, not caught up.
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	wantISR(1)
	w.SetPosition(6)
	wantISR(1, 2)

	clock.Stop() // the session ended
	wantISR(1)

	clock2 := new(kapi.FetchClock)
	w2 := kapi.NewWatch(func() {}, 2, clock2)
	w2.SetPosition(6)
	p.Watch(w2)
	clock2.Tick(later)
	wantISR(1, 2)
	w2.Close() // the session forgot the partition
	wantISR(1)
}

// A leader's changes that a fetch could see wake the partition's watches:
// appends and high watermark moves, leadership changes, a new log start.
func TestPartitionChangesNotifyWatches(t *testing.T) {
	p := isrLeader(t, []int32{1, 2}, 2)
	n := 0
	w := kapi.NewWatch(func() { n++ }, 2, new(kapi.FetchClock))
	p.Watch(w)
	step := func(what string, f func()) {
		t.Helper()
		before := n
		f()
		if n == before {
			t.Fatalf("%s did not notify the watch", what)
		}
	}
	step("an append", func() {
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	})
	step("the high watermark's move", func() { fetched(t, p, 2, 3) })
	step("a new log start", func() {
		if _, err := p.DeleteRecordsBefore(1); err != nil {
			t.Fatal(err)
		}
	})
	step("a new leader epoch", func() {
		p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 1)
	})
	w.Close()
	before := n
	fetched(t, p, 2, 3)
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	if n != before {
		t.Fatal("a closed watch was notified")
	}
}

// The first append to a partition idle for longer than the lag budget
// does not make its followers lag (issue 19): their sessions held it at
// the log end until the append, so they were caught up until then and get
// the lag budget from it to fetch the new records (Kafka counts a fetch at
// the log end as it was then). Before, each follower looked lagging from
// the append until its fetch reached the new end, and the leader shrank
// the ISR and grew it back for each of thousands of new partitions' first
// writes.
func TestIdleFollowerCaughtUpUntilAppend(t *testing.T) {
	const lagMax = 10 * time.Second
	p := isrLeader(t, []int32{1, 2, 3}, 5)
	fetched(t, p, 2, 5)
	fetched(t, p, 3, 5)
	idleSince := time.Now().Add(-time.Hour) // the last fetch that listed the partition
	p.repl.mu.Lock()
	for i := range p.repl.followers {
		p.repl.followers[i].caughtUpAt = idleSince
	}
	p.repl.mu.Unlock()
	for _, id := range []int32{2, 3} {
		clock := new(kapi.FetchClock)
		w := kapi.NewWatch(func() {}, id, clock)
		w.SetPosition(5)
		p.Watch(w)
		t.Cleanup(w.Close)
		clock.Tick(time.Now()) // the session fetched just now, holding 5
	}
	var at time.Time // the append
	wantISR := func(when time.Time, want ...int32) {
		t.Helper()
		isr, _, _ := p.wantedISR(when, lagMax)
		if !slices.Equal(isr, want) {
			t.Fatalf("wanted ISR %v %v after the append, want %v", isr, when.Sub(at), want)
		}
	}
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	at = time.Now()
	wantISR(at.Add(time.Second), 1, 2, 3) // fetching the new record
	wantISR(at.Add(lagMax/2), 1, 2, 3)
	wantISR(at.Add(2*lagMax), 1) // never fetched it: lagging from the append on
	fetched(t, p, 2, 6)
	wantISR(time.Now().Add(lagMax/2), 1, 2, 3)
}
