package segments

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// countingFS counts the files open through it, failing the test on a
// second Close of one.
type countingFS struct {
	vfs.FS
	t    *testing.T
	open atomic.Int64
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	runtime.Gosched() // let opens of one path overlap
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	return &countedFile{File: f, c: c}, nil
}

type countedFile struct {
	vfs.File
	c      *countingFS
	closed atomic.Bool
}

func (f *countedFile) Close() error {
	if f.closed.Swap(true) {
		f.c.t.Error("a cached file closed twice")
	}
	f.c.open.Add(-1)
	return f.File.Close()
}

// Many goroutines acquiring, releasing and forgetting a few paths behind a
// small cache (so opens of one path overlap, are forgotten in flight, and
// evict each other): every pinned handle reads its own path's file, and
// once all are released the cache's count, its idle list (linked through
// the entries), its entries and its opens in flight agree with the files
// really open, within max.
func TestFileCacheRandomized(t *testing.T) {
	mem := vfs.NewMemFS()
	const paths = 12
	name := func(i int) string { return fmt.Sprintf("/d/%02d", i) }
	if err := mem.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	for i := range paths {
		f, err := mem.Create(name(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(name(i)), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	fs := &countingFS{FS: mem, t: t}
	c := NewFileCache(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var held []*cachedFile
			for range 3000 {
				switch r := rng.IntN(10); {
				case r < 5:
					p := rng.IntN(paths)
					e, err := c.acquire(fs, name(p))
					if err != nil {
						t.Error(err)
						return
					}
					b := make([]byte, len(name(p)))
					if _, err := e.f.ReadAt(b, 0); err != nil || string(b) != name(p) {
						t.Errorf("handle of %s read %q, %v", name(p), b, err)
						return
					}
					held = append(held, e)
				case r < 9 && len(held) > 0:
					i := rng.IntN(len(held))
					c.release(held[i])
					held = append(held[:i], held[i+1:]...)
				default:
					c.forget(fs, name(rng.IntN(paths)))
				}
			}
			for _, e := range held {
				c.release(e)
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := fs.open.Load(); int64(c.open) != got || c.open > c.max {
		t.Errorf("cache counts %d open, %d are (max %d)", c.open, got, c.max)
	}
	if len(c.opening) != 0 {
		t.Errorf("%d paths still opening", len(c.opening))
	}
	n := 0
	var prev *cachedFile
	for e := c.idle.front; e != nil; prev, e = e, e.next {
		if e.prev != prev || e.refs != 0 || e.forgotten || c.entries[e.key] != e {
			t.Fatalf("idle entry %s: prev %p (want %p), refs %d, forgotten %v, cached %v", e.key.path, e.prev, prev, e.refs, e.forgotten, c.entries[e.key] == e)
		}
		n++
	}
	if c.idle.back != prev || n != c.idle.len || n != len(c.entries) || n != c.open {
		t.Errorf("idle list: %d linked, len %d, %d entries, %d open", n, c.idle.len, len(c.entries), c.open)
	}
}
