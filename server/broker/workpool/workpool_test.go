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

type burstTask struct{ n *int }

func (c burstTask) Run() { *c.n++ }

// A drained queue keeps its array for the next burst (issue 19: a
// follower queues an answer's 100,000 applies at once), and a queue
// consumed from the front while tasks keep coming moves its tasks down
// instead of growing on: every task runs once, in order.
func TestQueueKeepsItsArray(t *testing.T) {
	var wg sync.WaitGroup
	q := New(context.Background(), &wg, 1)
	ran := 0
	hold := make(chan struct{})
	q.Do(func() { <-hold }) // the one worker waits: the rest queue
	for range 1000 {
		q.DoTask(burstTask{&ran})
	}
	close(hold)
	wg.Wait()
	kept := cap(q.queue)
	if ran != 1000 || kept < 1000 || len(q.queue) != 0 || q.head != 0 {
		t.Fatalf("after a burst: %d ran, queue len %d cap %d head %d; want 1000 ran, the array kept, empty", ran, len(q.queue), kept, q.head)
	}
	var order []int
	var mu sync.Mutex
	hold = make(chan struct{})
	q.Do(func() { <-hold })
	for i := range 3 * kept {
		if i == kept/2 { // the worker consumes while more come
			close(hold)
		}
		q.Do(func() { mu.Lock(); order = append(order, i); mu.Unlock() })
	}
	wg.Wait()
	if len(order) != 3*kept || !slices.IsSorted(order) {
		t.Fatalf("%d of %d tasks ran, in order %v", len(order), 3*kept, slices.IsSorted(order))
	}
}
