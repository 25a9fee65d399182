package workpool

import (
	"context"
	"sync"
	"testing"
)

// Tasks run in the order given on no more goroutines than the bound, and
// the caller never waits for them.
func TestPoolBoundsGoroutinesAndKeepsOrder(t *testing.T) {
	var wg sync.WaitGroup
	q := New(context.Background(), &wg, 3)
	hold := make(chan struct{})
	var mu sync.Mutex
	running, most := 0, 0
	var order []int
	for i := range 20 {
		q.Do(func() { // returns at once although the tasks are held
			mu.Lock()
			running++
			most = max(most, running)
			order = append(order, i)
			mu.Unlock()
			<-hold
			mu.Lock()
			running--
			mu.Unlock()
		})
	}
	close(hold)
	wg.Wait()
	if most > 3 {
		t.Fatalf("%d tasks ran at once, want at most 3", most)
	}
	if len(order) != 20 {
		t.Fatalf("%d tasks ran, want 20", len(order))
	}
	// Each worker takes the oldest queued task: no task starts before one
	// queued more than the bound ahead of it.
	for pos, i := range order {
		if i > pos+2 {
			t.Fatalf("task %d started %dth: order %v", i, pos+1, order)
		}
	}
}

// Once the context ends, the tasks not started are dropped and the
// goroutines end.
func TestPoolDropsQueueWhenContextEnds(t *testing.T) {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	q := New(ctx, &wg, 1)
	started := make(chan struct{})
	hold := make(chan struct{})
	ran := 0
	q.Do(func() { close(started); <-hold })
	for range 5 {
		q.Do(func() { ran++ })
	}
	<-started
	cancel()
	close(hold)
	wg.Wait()
	if ran != 0 {
		t.Fatalf("%d tasks ran after the context ended, want 0", ran)
	}
}
