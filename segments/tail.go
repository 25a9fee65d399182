package segments

import (
	"container/list"
	"io"
	"net"
	"sort"
	"sync"

	"github.com/runnel/runnel/recordbatch"
)

// The in-memory tail of a log (Redpanda's batch cache, on a small scale).
// A follower fetches the batches its leader appended a moment ago, and at
// hundreds of thousands of partitions the leader's file cache holds few of
// their segment files: each such read reopened the file, searched the
// index and pread the bytes (issue 19: after a kill -9 at 300,000
// partitions, openat was 9% of a survivor's CPU and serving followers'
// fetches 14.5%). Each append keeps a copy of the batches it wrote, the
// latest ones of the active segment, and a Read whose offset falls among
// them answers from memory: the same bytes, cut by the same maxBytes and
// maxOffset rules, with no file opened.
//
// A tail is the suffix of the active segment's file: its batches are the
// last ones of the segment, contiguous and ending at its end. It is
// dropped whenever the bytes under it may change or go: a truncation
// (Truncate, Reset), a roll (a new active segment), a sticky error,
// Recover, Close. Retention, DeleteRecordsBefore and compaction leave the
// active segment's bytes alone and so the tail too (Read's bounds come
// from the log's offsets, checked before the tail is asked). Read checks,
// besides, that the tail still belongs to the active segment, at its
// current size and truncation generation, so a path that forgot to drop it
// could not serve stale bytes. The bytes are never written after they are
// copied in: a chunk handed out stays valid after the tail is dropped.

// TailCache is the node-wide byte budget of the logs' in-memory tails,
// shared by all logs of a process as FileCache is (Options.Tails). When
// an append would take it past its budget, the tails of the logs appended
// to least recently are dropped whole (a follower has most likely fetched
// them by then). A log's tail holds at most perLog bytes; a batch larger than that is not
// kept. Safe for concurrent use; its lock is held for its bookkeeping
// only, never across I/O, and is taken after any Log.mu (lock order:
// Log.mu, TailCache.mu): one log's append drops another's tail without
// that log's mu, which is why a tail's batches are guarded by this lock.
type TailCache struct {
	budget, perLog int64

	mu   sync.Mutex // guards the fields below and every logTail's batches, bytes and elem
	used int64
	lru  list.List // *logTail holding batches, least recently appended to first
}

// tailBatchOverhead is what a batch kept costs besides its bytes: its
// tailBatch entry and the slice header of its copy, counted against the
// budget so that many tiny batches cannot exceed it unseen.
const tailBatchOverhead = 64

// DefaultTailPerLog bounds one log's tail: a follower's fetch asks for 1
// MiB of a partition (Kafka's replica.fetch.max.bytes), and one that is
// further behind reads from the file.
const DefaultTailPerLog = 1 << 20

// DefaultTailBudget is the node-wide budget a server gives its tails
// unless told otherwise (--log-tail-cache-bytes).
const DefaultTailBudget = 64 << 20

// NewTailCache returns a budget of budget bytes for all tails, at most
// perLog of them for one log (perLog <= 0: DefaultTailPerLog; never more
// than budget). A budget <= 0 returns nil: no log keeps a tail.
func NewTailCache(budget, perLog int64) *TailCache {
	if budget <= 0 {
		return nil
	}
	if perLog <= 0 {
		perLog = DefaultTailPerLog
	}
	return &TailCache{budget: budget, perLog: min(perLog, budget)}
}

// Bytes reports the bytes the tails hold, overhead included (0 for a nil
// cache).
func (c *TailCache) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// logTail is one log's tail. seg, gen and end are guarded by the Log's mu;
// batches, bytes and elem by TailCache.mu (another log's append may drop
// them to make room).
type logTail struct {
	seg *segment // the active segment the batches end
	gen uint64   // Log.truncGen when they were kept
	end int64    // seg.size after the last batch kept

	batches []tailBatch // oldest first; contiguous, ending at end
	bytes   int64       // counted against the budget
	elem    *list.Element
}

// tailBatch is one batch kept: its offsets and its bytes (never written).
type tailBatch struct {
	base, last int64
	data       []byte
}

// keepTailLocked records an append of buf (batches hs) written at pos of
// the active segment s. A tail that no longer ends where buf was written
// (dropped, evicted, or of another segment or truncation generation) starts
// over with buf.
func (l *Log) keepTailLocked(s *segment, pos int64, buf []byte, hs []recordbatch.Header) {
	c := l.tails
	if c == nil {
		return
	}
	t := l.tail
	if t == nil {
		t = &logTail{}
		l.tail = t
	}
	contiguous := t.seg == s && t.gen == l.truncGen && t.end == pos
	t.seg, t.gen, t.end = s, l.truncGen, pos+int64(len(buf))
	keep := int64(len(buf))+int64(len(hs))*tailBatchOverhead <= c.perLog
	var data []byte
	if keep {
		data = make([]byte, len(buf)) // the caller's buffer is its own again once Append returns
		copy(data, buf)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !contiguous || !keep {
		c.dropLocked(t)
	}
	if !keep {
		return
	}
	off := int64(0)
	for _, h := range hs {
		t.batches = append(t.batches, tailBatch{base: h.BaseOffset, last: h.LastOffset(), data: data[off : off+h.Size : off+h.Size]})
		off += h.Size
		t.bytes += h.Size + tailBatchOverhead
		c.used += h.Size + tailBatchOverhead
	}
	if t.elem == nil {
		t.elem = c.lru.PushBack(t)
	} else {
		c.lru.MoveToBack(t.elem)
	}
	c.trimLocked(t, c.perLog)
	// t is the last in lru and within perLog <= budget: the others go
	// before it would.
	for c.used > c.budget {
		c.dropLocked(c.lru.Front().Value.(*logTail))
	}
}

// trimLocked drops t's oldest batches until it holds at most limit bytes.
func (c *TailCache) trimLocked(t *logTail, limit int64) {
	n := 0
	for n < len(t.batches) && t.bytes > limit {
		size := int64(len(t.batches[n].data)) + tailBatchOverhead
		t.bytes -= size
		c.used -= size
		n++
	}
	if n == 0 {
		return
	}
	clear(t.batches[:n]) // the array keeps no dropped bytes alive
	t.batches = t.batches[n:]
	if len(t.batches) == 0 {
		c.dropLocked(t)
	}
}

// dropLocked empties t and gives its bytes back.
func (c *TailCache) dropLocked(t *logTail) {
	c.used -= t.bytes
	t.bytes = 0
	t.batches = nil
	if t.elem != nil {
		c.lru.Remove(t.elem)
		t.elem = nil
	}
}

// dropTailLocked drops the log's tail: the bytes on disk under it are
// about to change or go, or the log stops serving reads.
func (l *Log) dropTailLocked() {
	t := l.tail
	if t == nil {
		return
	}
	t.seg = nil
	l.tails.mu.Lock()
	l.tails.dropLocked(t)
	l.tails.mu.Unlock()
}

// readTailLocked answers Read from the tail when offset falls in it: the
// batch holding offset (or the first after it) and the ones after it that
// fit maxBytes and start below maxOffset, as rangeEnd cuts a file's run;
// ok is false when the tail cannot answer and the file must.
func (l *Log) readTailLocked(offset int64, maxBytes int, maxOffset int64) (c Chunk, ok bool) {
	t := l.tail
	if t == nil || offset >= l.end {
		return nil, false
	}
	s := l.active()
	if t.seg != s || t.gen != l.truncGen || t.end != s.size {
		return nil, false
	}
	l.tails.mu.Lock()
	defer l.tails.mu.Unlock()
	bs := t.batches
	if len(bs) == 0 || offset < bs[0].base {
		return nil, false
	}
	i := sort.Search(len(bs), func(i int) bool { return bs[i].last >= offset })
	if i == len(bs) {
		return nil, false // past the last batch: not the tail's to say
	}
	if maxOffset >= 0 && bs[i].base >= maxOffset {
		return emptyChunk{}, true
	}
	mc := &memChunk{n: len(bs[i].data)}
	j := i + 1
	for ; j < len(bs); j++ {
		if mc.n+len(bs[j].data) > maxBytes || (maxOffset >= 0 && bs[j].base >= maxOffset) {
			break
		}
		mc.n += len(bs[j].data)
	}
	if j == i+1 {
		mc.one[0] = bs[i].data
		mc.parts = mc.one[:]
	} else {
		mc.parts = make([][]byte, 0, j-i)
		for _, b := range bs[i:j] {
			mc.parts = append(mc.parts, b.data)
		}
	}
	return mc, true
}

// memChunk is a run of batches read from a log's tail: slices of its
// copies, which nothing writes again. It holds no file.
type memChunk struct {
	one   [1][]byte // parts' array when the run is one batch
	parts [][]byte
	n     int
}

func (c *memChunk) Len() int     { return c.n }
func (c *memChunk) Close() error { return nil }

// Bytes returns a copy, the caller's to keep or change, as a file chunk's
// is: the tail's bytes are shared with every other reader.
func (c *memChunk) Bytes() ([]byte, error) {
	b := make([]byte, 0, c.n)
	for _, p := range c.parts {
		b = append(b, p...)
	}
	return b, nil
}

// WriteTo writes the batches, with one writev when w is a connection.
func (c *memChunk) WriteTo(w io.Writer) (int64, error) {
	if len(c.parts) == 1 {
		n, err := w.Write(c.parts[0])
		return int64(n), err
	}
	bufs := make(net.Buffers, len(c.parts)) // WriteTo consumes its receiver
	copy(bufs, c.parts)
	return bufs.WriteTo(w)
}
