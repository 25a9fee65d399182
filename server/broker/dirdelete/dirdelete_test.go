package dirdelete

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Add returns while the deletion runs; Wait(dir) blocks until that
// directory's deletions ran, in the order they were added, and not for
// other directories; at most Workers run at once; done gets del's error.
func TestQueue(t *testing.T) {
	q := New(2)
	gate := make(chan struct{})
	var running, most atomic.Int32
	var mu sync.Mutex
	var order []string
	del := func(name string, err error) func() error {
		return func() error {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-gate
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			running.Add(-1)
			return err
		}
	}
	errBoom := errors.New("boom")
	var got error
	for i, name := range []string{"a1", "b", "c", "d"} {
		dir := name[:1]
		var done func(error)
		if i == 0 {
			done = func(err error) { got = err }
		}
		q.Add(dir, del(name, errBoom), done)
	}
	q.Add("a", del("a2", nil), nil)

	// What had run when Wait(a) returned: both of a's deletions (they
	// are held until the gate opens, so a Wait that does not block sees
	// neither).
	waited := make(chan []string)
	go func() {
		q.Wait("a")
		mu.Lock()
		defer mu.Unlock()
		waited <- append([]string(nil), order...)
	}()
	close(gate)
	if seen := <-waited; indexOf(seen, "a1") < 0 || indexOf(seen, "a2") < 0 {
		t.Fatalf("Wait(a) returned when only %v had run", seen)
	}
	mu.Lock()
	ia1, ia2 := indexOf(order, "a1"), indexOf(order, "a2")
	mu.Unlock()
	if ia1 < 0 || ia2 < 0 || ia1 > ia2 {
		t.Fatalf("order %v: a1 must run before a2", order)
	}
	q.WaitAll()
	if len(order) != 5 || most.Load() > 2 {
		t.Fatalf("ran %v, at most %d at once (want 5, at most 2)", order, most.Load())
	}
	if !errors.Is(got, errBoom) {
		t.Fatalf("done got %v", got)
	}
	q.Wait("never queued") // returns at once
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
