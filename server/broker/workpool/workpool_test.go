package workpool

import (
	"context"
	"slices"
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

// DoTask queues a task the caller keeps (a pointer into its slice) and
// runs each once, in order with closures queued by Do.
func TestPoolRunsTasks(t *testing.T) {
	var wg sync.WaitGroup
	q := New(context.Background(), &wg, 1)
	var mu sync.Mutex
	var order []int
	tasks := make([]countTask, 3)
	for i := range tasks {
		tasks[i] = countTask{i: i * 2, mu: &mu, order: &order}
		q.DoTask(&tasks[i])
		q.Do(func() { mu.Lock(); order = append(order, i*2+1); mu.Unlock() })
	}
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Fatalf("ran %v, want %v", order, want)
	}
}

type countTask struct {
	i     int
	mu    *sync.Mutex
	order *[]int
}

func (c *countTask) Run() { c.mu.Lock(); *c.order = append(*c.order, c.i); c.mu.Unlock() }
