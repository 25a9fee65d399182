// Package workpool runs tasks on a bounded number of goroutines without
// making the caller wait: tasks queue without bound, in order, and a
// goroutine is started for them only while fewer than the bound run. The
// broker's replica fetchers hand it the appends and log opens that wait on
// the disk (server/broker/fetchapply.go), so that one slow partition does
// not stall a leader's fetch loop.
//
// Goroutines: at most the bound, each counted in the wait group the pool
// was given, each ending when the queue is empty or the pool's context
// ended (the tasks not started then are dropped). Lock order: the pool's
// mutex is a leaf, never held while a task runs.
package workpool

import (
	"context"
	"sync"
)

// Pool runs tasks on at most max goroutines.
type Pool struct {
	ctx context.Context
	wg  *sync.WaitGroup
	max int

	mu sync.Mutex
	// queue holds the tasks not started from head on (guarded by mu).
	// Its array is kept when it drains, up to keepQueue tasks: a
	// follower queues an answer's 100,000 applies at once, and the queue
	// grew again from nothing each answer, its array moving on as it was
	// consumed from the front (issue 19: 37.8 MB in 40 s after a kill
	// -9 at 300,000 partitions).
	queue   []Task
	head    int
	workers int // guarded by mu
}

// keepQueue bounds the array a drained queue keeps (16 bytes a task).
const keepQueue = 1 << 18

// Task is a queued piece of work whose state its caller keeps: a pointer
// into a slice made once for many tasks is queued without an allocation
// each (DoTask), where a closure capturing that state costs one (issue
// 19: a follower applying an answer of 100,000 partitions queued a
// closure for each).
type Task interface{ Run() }

// funcTask is a closure as a Task (a func value is one word: queued
// without an allocation of its own).
type funcTask func()

func (f funcTask) Run() { f() }

// New returns a pool of at most max goroutines, each counted in wg, that
// drops its queue once ctx ends.
func New(ctx context.Context, wg *sync.WaitGroup, max int) *Pool {
	return &Pool{ctx: ctx, wg: wg, max: max}
}

// Do queues task and returns. A caller that waits on the pool's wait group
// itself calls Do only from a goroutine of that group (or before waiting),
// so no goroutine is added to a group already waited down to zero.
func (q *Pool) Do(task func()) { q.DoTask(funcTask(task)) }

// DoTask is Do with a Task.
func (q *Pool) DoTask(task Task) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == cap(q.queue) && q.head >= len(q.queue)/2 {
		// Full with half of it consumed: move the rest down, not on.
		n := copy(q.queue, q.queue[q.head:])
		clear(q.queue[n:])
		q.queue, q.head = q.queue[:n], 0
	}
	q.queue = append(q.queue, task)
	if q.workers < q.max {
		q.workers++
		q.wg.Add(1)
		go q.work()
	}
}

func (q *Pool) work() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if q.head == len(q.queue) || q.ctx.Err() != nil {
			clear(q.queue[q.head:]) // the tasks dropped
			q.queue, q.head = q.queue[:0], 0
			if cap(q.queue) > keepQueue {
				q.queue = nil // a drained queue gives a large array back
			}
			q.workers--
			q.mu.Unlock()
			return
		}
		task := q.queue[q.head]
		q.queue[q.head] = nil
		q.head++
		q.mu.Unlock()
		task.Run()
	}
}
