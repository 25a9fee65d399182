package broker

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// The ISR loop's round asks a led partition whether its ISR should change
// only when a change can be due (issue 19: it asked each of 300,000 open
// logs each second, a fifth of a node's CPU after a kill -9): after new
// metadata, after a fetch that brings a follower outside the ISR to the
// high watermark, and when an ISR member's lag budget runs out, which an
// idle partition's follower sessions move on without touching it.
func TestISRRoundAsksOnlyWhatCanChange(t *testing.T) {
	const n = 20
	meta, b, parts := ledLogs(t, t.TempDir(), n)
	defer b.Close()
	lagMax := b.replicaLagMax
	ctx := context.Background()
	round := func(at time.Time, wantAsked int, wantISRs ...[]int32) {
		t.Helper()
		if asked := b.isrRound(ctx, at); asked != wantAsked {
			t.Fatalf("round at +%v asked %d partitions, want %d", time.Until(at).Round(time.Second), asked, wantAsked)
		}
		meta.mu.Lock()
		proposed := meta.proposed
		meta.proposed = nil
		meta.mu.Unlock()
		if len(proposed) != len(wantISRs) {
			t.Fatalf("round at +%v proposed %+v, want ISRs %v", time.Until(at).Round(time.Second), proposed, wantISRs)
		}
		for i, ch := range proposed {
			if !slices.Equal(ch.ISR, wantISRs[i]) {
				t.Fatalf("proposed %+v, want ISR %v", ch, wantISRs[i])
			}
		}
	}
	now := time.Now()
	round(now, n) // the first round asks every one: nothing due yet
	round(now.Add(time.Second), 0)

	// Follower 3 falls behind in partition 4 and leaves its ISR.
	p := parts[4]
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	fetched(t, p, 2, p.log().EndOffset()) // an ISR member's fetch: nothing due
	round(now.Add(2*time.Second), 0)
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 1)
	round(now.Add(3*time.Second), 1) // new metadata: asked, 3 is behind
	round(now.Add(4*time.Second), 0)
	fetched(t, p, 3, p.log().EndOffset()-1) // still behind the mark
	round(now.Add(5*time.Second), 0)
	fetched(t, p, 3, p.log().EndOffset()) // caught up: it joins
	round(now.Add(6*time.Second), 1, []int32{1, 2, 3})
	round(now.Add(7*time.Second), 1, []int32{1, 2, 3}) // asked until the change is made
	p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 1)
	round(now.Add(8*time.Second), 1)
	round(now.Add(9*time.Second), 0)
	// Its topic's metadata applied again, every partition as it was
	// (reconcile sets a changed topic's every partition): none asked.
	for _, p := range parts {
		p.setMeta(metaOf(p), 1)
	}
	round(now.Add(9*time.Second+time.Millisecond), 0)

	// The followers' sessions hold every partition at its end, idle.
	clocks := map[int32]*kapi.FetchClock{2: new(kapi.FetchClock), 3: new(kapi.FetchClock)}
	for _, p := range parts {
		for id, clock := range clocks {
			w := kapi.NewWatch(func() {}, id, clock)
			w.SetPosition(p.log().EndOffset())
			p.Watch(w)
			t.Cleanup(w.Close)
		}
	}
	// No fetch listed a partition for a lag budget: each is asked once,
	// and the sessions' fetches say the followers are still caught up.
	later := time.Now().Add(lagMax + time.Second)
	tick := func(at time.Time) {
		for _, c := range clocks {
			c.Tick(at)
		}
	}
	tick(later.Add(-time.Second))
	round(later, n)
	round(later.Add(time.Second), 0)
	tick(later.Add(lagMax / 2))
	round(later.Add(lagMax-2*time.Second), 0)
	// A lag budget after the tick the checks saw: asked again, and the
	// sessions' later fetch keeps them in.
	round(later.Add(lagMax), n)
	round(later.Add(lagMax+time.Second), 0)
	// The sessions stopped fetching: a lag budget after their last
	// fetch, every ISR shrinks to the leader.
	shrunk := make([][]int32, n)
	for i := range shrunk {
		shrunk[i] = []int32{1}
	}
	round(later.Add(lagMax/2+lagMax+time.Second), n, shrunk...)
}

// isrCheckDue never hides a change wantedISR would find: over random
// fetches, appends, session positions (moving on) and fetches, metadata and the
// passing of time, whenever a change is wanted the check is due (and the
// loop then asks, as a round would, which moves isrDue on), except a
// follower's return by its session's fetches alone, asked within
// sessionRejoinCheck of the last check. Not covered,
// by design: a session that ends or drops the partition (its clock
// stopped, its watch closed) takes back the fetches it stood for; the
// follower then leaves at most a lag budget after the last of them that a
// check counted, as one that stopped fetching would.
func TestISRCheckDueNeverHidesAChange(t *testing.T) {
	const lagMax = 10 * time.Second
	rng := rand.New(rand.NewPCG(5, 6))
	for run := range 40 {
		p := isrLeader(t, []int32{1, 2, 3}, 3)
		now := time.Now()
		p.now = func() time.Time { return now }
		p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 1)
		epoch := int32(4)
		checked := now // the last check
		clocks := map[int32]*kapi.FetchClock{2: new(kapi.FetchClock), 3: new(kapi.FetchClock)}
		watches := map[int32]*kapi.Watch{}
		pos := map[int32]int64{}
		for id, c := range clocks {
			watches[id] = kapi.NewWatch(func() {}, id, c)
			t.Cleanup(watches[id].Close)
		}
		for step := range 80 {
			id := int32(2 + rng.IntN(2))
			end := p.log().EndOffset()
			var what string
			switch rng.IntN(7) {
			case 0:
				what = "fetch"
				fetched(t, p, id, max(0, end-int64(rng.IntN(2))))
			case 1:
				what = "append"
				if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
					t.Fatal(err)
				}
			case 2:
				what = "session holds"
				// A session's position in a leader's log only moves on.
				pos[id] = max(pos[id], end-int64(rng.IntN(2)))
				watches[id].SetPosition(pos[id])
				p.Watch(watches[id])
			case 3:
				what = "session fetch"
				clocks[id].Tick(now)
			case 4:
				what = "change made"
				if isr, _, ok := p.wantedISR(now, lagMax); ok {
					epoch++
					p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: isr}, 1)
				}
			case 5:
				what = "metadata"
				isrs := [][]int32{{1}, {1, 2}, {1, 3}, {1, 2, 3}}
				epoch++
				p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: isrs[rng.IntN(len(isrs))]}, 1)
			case 6:
				what = "time"
				now = now.Add(time.Duration(rng.Int64N(int64(lagMax))))
				if p.isrCheckDue(now) {
					p.isrChangeWanted(now, lagMax) // rounds pass meanwhile
					checked = now
				}
			}
			if isr, _, ok := p.wantedISR(now, lagMax); ok && !p.isrCheckDue(now) {
				// Only a join by a session's fetch alone may wait, and
				// no longer than sessionRejoinCheck after the last check.
				due := time.Unix(0, p.isrDue.Load())
				if shrinks(p.currentISR(), isr) || due.After(checked.Add(sessionRejoinCheck(lagMax))) {
					t.Fatalf("run %d step %d (%s): ISR %v, %v wanted, but the check is not due for %v", run, step, what, p.currentISR(), isr,
						due.Sub(now))
				}
			}
			if p.isrCheckDue(now) {
				p.isrChangeWanted(now, lagMax) // the round
				checked = now
			}
		}
	}
}

// The ISR round asks exactly the partitions whose check is due
// (isrCheckDue, which TestISRCheckDueNeverHidesAChange ties to the
// changes wanted), without walking the others: over random fetches,
// appends, session holds and fetches, metadata (leadership moving away
// and back among it), ISR changes made and time, every round asks each
// partition due at its time once, and no other.
func TestISRRoundAsksEveryDuePartition(t *testing.T) {
	const n = 12
	meta, b, parts := ledLogs(t, t.TempDir(), n)
	defer b.Close()
	lagMax := b.replicaLagMax
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
	now := time.Now()
	for _, p := range parts {
		p.now = func() time.Time { return now }
	}
	clocks := map[int32]*kapi.FetchClock{2: new(kapi.FetchClock), 3: new(kapi.FetchClock)}
	type key struct {
		p  *Partition
		id int32
	}
	watches := map[key]*kapi.Watch{}
	for _, p := range parts {
		for id, c := range clocks {
			w := kapi.NewWatch(func() {}, id, c)
			t.Cleanup(w.Close)
			watches[key{p, id}] = w
		}
	}
	asked := map[*Partition]int{}
	b.onISRAsked = func(p *Partition) { asked[p]++ }
	ctx := context.Background()
	total := 0
	for step := range 1500 {
		p := parts[rng.IntN(n)]
		id := int32(2 + rng.IntN(2))
		m := metaOf(p)
		switch rng.IntN(8) {
		case 0:
			if m.Leader == 1 {
				end := p.log().EndOffset()
				fetched(t, p, id, max(0, end-int64(rng.IntN(2))))
			}
		case 1:
			if m.Leader == 1 {
				if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
					t.Fatal(err)
				}
			}
		case 2:
			w := watches[key{p, id}]
			w.SetPosition(p.log().EndOffset() - int64(rng.IntN(2)))
			p.Watch(w)
		case 3:
			clocks[id].Tick(now)
		case 4:
			m.PartitionEpoch++
			m.ISR = [][]int32{{1}, {1, 2}, {1, 3}, {1, 2, 3}}[rng.IntN(4)]
			if rng.IntN(4) == 0 { // leadership moves to 2, or back here
				m.LeaderEpoch++
				m.Leader = 3 - m.Leader
			}
			p.setMeta(m, 1)
		case 5:
			meta.mu.Lock()
			proposed := meta.proposed
			meta.proposed = nil
			meta.mu.Unlock()
			for _, ch := range proposed { // the controller makes the changes
				q := parts[ch.Partition]
				if cur := metaOf(q); cur.PartitionEpoch == ch.PartitionEpoch && cur.Leader == 1 {
					cur.PartitionEpoch++
					cur.ISR = ch.ISR
					q.setMeta(cur, 1)
				}
			}
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(lagMax / 2))))
			due := map[*Partition]bool{}
			for _, q := range parts {
				if q.isrCheckDue(now) {
					due[q] = true
				}
			}
			clear(asked)
			checked := b.isrRound(ctx, now)
			total += checked
			for _, q := range parts {
				if due[q] && asked[q] != 1 || !due[q] && asked[q] != 0 {
					t.Fatalf("step %d: %s-%d asked %d times, due %v (at %v)", step, q.topic, q.index, asked[q], due[q],
						time.Unix(0, q.isrDue.Load()).Sub(now))
				}
			}
		}
	}
	if total < n {
		t.Fatalf("%d partitions asked in all: the run did not test the rounds", total)
	}
}

// shrinks reports whether want leaves out a member of isr.
func shrinks(isr, want []int32) bool {
	for _, r := range isr {
		if !slices.Contains(want, r) {
			return true
		}
	}
	return false
}

// metaOf is p's metadata as setMeta last applied it.
func metaOf(p *Partition) raftfsm.Partition {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	return raftfsm.Partition{Leader: p.leader.Load(), LeaderEpoch: p.leaderEpoch.Load(), PartitionEpoch: p.repl.partitionEpoch,
		Replicas: slices.Clone(p.repl.replicas), ISR: slices.Clone(p.repl.isr)}
}

// A follower outside the ISR, at the high watermark but lagging, is asked
// about again within sessionRejoinCheck only while a fetch session of its
// holds the partition (its fetches alone may bring it back); a dead
// follower's session is gone, and only a fetch of the partition, which
// asks itself, can: its partitions wait for their members' lag budget.
func TestRejoinCheckOnlyWhileASessionHolds(t *testing.T) {
	const lagMax = 20 * time.Second
	for _, held := range []bool{false, true} {
		p := isrLeader(t, []int32{1, 2}, 3)
		now := time.Now()
		p.now = func() time.Time { return now }
		end := p.log().EndOffset()
		fetched(t, p, 3, end) // at the mark
		now = now.Add(2 * lagMax)
		fetched(t, p, 2, end) // the member keeps up; 3 lags now
		if held {
			clock := new(kapi.FetchClock)
			clock.Tick(now.Add(-lagMax)) // fetched, but not at the end since
			w := kapi.NewWatch(func() {}, 3, clock)
			t.Cleanup(w.Close)
			w.SetPosition(end - 1)
			p.Watch(w)
		}
		if p.isrChangeWanted(now, lagMax) {
			t.Fatalf("held %t: a change wanted: ISR %v", held, p.currentISR())
		}
		due := time.Unix(0, p.isrDue.Load()).Sub(now)
		want := lagMax // the member's budget
		if held {
			want = sessionRejoinCheck(lagMax)
		}
		if due != want {
			t.Fatalf("held %t: next check in %v, want %v", held, due, want)
		}
	}
}
