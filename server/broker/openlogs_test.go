package broker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A walk of the open logs sees each partition in the set for the whole
// walk exactly once, whatever is added and removed meanwhile (slots freed
// and reused under it), and none removed before it started.
func TestOpenLogsWalkSeesEachStayingPartitionOnce(t *testing.T) {
	var s openLogs
	rng := rand.New(rand.NewPCG(1, 2))
	newPart := func(i int) *Partition { return &Partition{index: int32(i), openSlot: -1} }
	var all []*Partition
	for i := range 3*openChunk + 17 {
		p := newPart(i)
		all = append(all, p)
		s.add(p)
	}
	for _, p := range all[:openChunk] { // free slots before the walk
		if rng.IntN(2) == 0 {
			s.remove(p)
		}
	}
	inAtStart := map[*Partition]bool{}
	for _, p := range all {
		if p.openSlot >= 0 {
			inAtStart[p] = true
		}
	}
	// The walk removes and adds partitions as it goes; the ones it never
	// touches must each be seen once.
	touched := map[*Partition]bool{}
	seen := map[*Partition]int{}
	next := len(all)
	calls := 0
	s.each(func(p *Partition) bool {
		seen[p]++
		if calls++; calls > 2*openChunk {
			return true // the walk must end: no more added behind it
		}
		for range 3 {
			q := all[rng.IntN(len(all))]
			touched[q] = true
			s.remove(q)
			n := newPart(next)
			next++
			all = append(all, n)
			touched[n] = true
			s.add(n)
		}
		return true
	})
	for p := range inAtStart {
		if !touched[p] && seen[p] != 1 {
			t.Fatalf("partition %d, in the set for the whole walk, seen %d times", p.index, seen[p])
		}
	}
	for p, n := range seen {
		if !inAtStart[p] && !touched[p] {
			t.Fatalf("partition %d seen %d times, never in the set", p.index, n)
		}
	}
	if got, want := s.len(), len(s.snapshot()); got != want {
		t.Fatalf("len %d, snapshot of %d", got, want)
	}
}

// isrChangeWanted, the ISR loop's allocation-free check, agrees with
// wantedISR over followers caught up, lagging, behind the high watermark
// and out of or in the ISR.
func TestISRChangeWantedAgreesWithWantedISR(t *testing.T) {
	const lagMax = 10 * time.Second
	rng := rand.New(rand.NewPCG(3, 4))
	isrs := [][]int32{{1}, {1, 2}, {1, 3}, {1, 2, 3}, {2, 3}, {1, 2, 3, 4}}
	for i := range 60 {
		isr := isrs[rng.IntN(len(isrs))]
		p := isrLeader(t, []int32{1}, 5)
		p.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: isr}, 1)
		for _, id := range []int32{2, 3} {
			if rng.IntN(3) > 0 {
				fetched(t, p, id, int64(rng.IntN(6)))
			}
		}
		now := time.Now().Add(time.Duration(rng.IntN(3)) * lagMax)
		_, _, want := p.wantedISR(now, lagMax)
		if got := p.isrChangeWanted(now, lagMax); got != want {
			isr, _, _ := p.wantedISR(now, lagMax)
			t.Fatalf("case %d: ISR %v, wanted %v: isrChangeWanted %v, wantedISR's ok %v", i, p.currentISR(), isr, got, want)
		}
	}
}

// The ISR loop's round allocates nothing per led partition whose ISR
// stays (issue 19: it ran over every open log each second).
func TestISRRoundAllocatesNothingPerPartition(t *testing.T) {
	p := isrLeader(t, []int32{1, 2, 3}, 5)
	fetched(t, p, 2, 5)
	fetched(t, p, 3, 5)
	now := time.Now()
	if allocs := testing.AllocsPerRun(100, func() {
		if p.isrChangeWanted(now, time.Minute) {
			t.Fatal("a change wanted of a caught-up ISR")
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations a check, want 0", allocs)
	}
	if isr := p.currentISR(); !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("ISR %v", isr)
	}
}
