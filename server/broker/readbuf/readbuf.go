// Package readbuf recycles the buffers the broker's HTTP reads load stored
// batches into (Pool), and loads a chunk of the log into one (ChunkBytes).
// It knows nothing of partitions; the broker gives every partition its Pool.
package readbuf

import (
	"fmt"
	"slices"
	"sync"

	"github.com/runnel/runnel/segments"
)

// ChunkBytes loads a chunk's bytes into *buf (grown as needed) when the
// chunk is a file range, else returns its own copy. The bytes are valid
// until the next call with the same buf: records read from them are
// either copied or handed over synchronously by the caller.
func ChunkBytes(c segments.Chunk, buf *[]byte) ([]byte, error) {
	fr, ok := c.(segments.FileRange)
	if !ok || buf == nil {
		return c.Bytes()
	}
	f, off, n := fr.FileRange()
	b := slices.Grow((*buf)[:0], int(n))[:n]
	*buf = b
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("segments: read chunk: %w", err)
	}
	return b, nil
}

// Pool recycles the buffers HTTP reads load stored batches into:
// a 4 MiB read used to allocate (and have cleared) 4 MiB per request.
// Buffers grown past keep are dropped, not kept; the memory budget
// (--http-memory-budget) already counts a read's bytes while it runs.
// Safe for concurrent use; the zero value is ready; a nil pool allocates.
type Pool struct{ p sync.Pool }

const keep = 16 << 20

// Get returns a buffer, empty or one Put gave back.
func (rp *Pool) Get() *[]byte {
	if rp == nil {
		return new([]byte)
	}
	if b, ok := rp.p.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// Put gives b back for a later Get (too large a one is dropped).
func (rp *Pool) Put(b *[]byte) {
	if rp == nil || cap(*b) == 0 || cap(*b) > keep {
		return
	}
	rp.p.Put(b)
}
