package segments

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// FileCache bounds the open file descriptors shared by all logs of a process.
// A log opens a segment file through the cache only while it uses it; a file
// no one uses stays open until the cache needs room, so an idle log costs no
// descriptor once other logs have pushed its files out. Files in use
// ("pinned", for example by an unclosed Chunk) are never closed under their
// user, so the bound can be exceeded while more files are pinned than max.
// CloseIdle closes the files no one has used for a while, so a log left
// idle gives its descriptors back even when other logs never push them out.
// An open refused for want of descriptors (EMFILE, ENFILE) closes half of
// the idle files and is tried once more (openRoom). A FileCache is safe
// for concurrent use.
//
// Its lock is held for its bookkeeping only, never across an open, create
// or close of a file: every log of the process takes it, and with the
// system calls under it, the first writes of thousands of new logs at once
// (each creating its segment file, and closing another to make room) queued
// every produce and replica append of the node behind one file operation
// at a time (issue 19). An open in flight is registered (opening), so a
// forget meanwhile keeps the handle it brings out of the cache: the caller
// gets the file as it was before the forget, as a caller pinned before it
// would have.
//
// A burst writing to more logs than the cache holds opens a file and
// closes another for every append (issue 19: 300,000 partitions behind
// 20,000 descriptors), so that cycle allocates one thing only, the
// cachedFile: the open in flight is registered as the entry it will
// become, and the idle list is threaded through the entries (a
// container/list element, an opening record and its slice were three
// more allocations an open).
type FileCache struct {
	max int

	mu      sync.Mutex // guards the fields below; taken after any Log.mu
	entries map[fileKey]*cachedFile
	idle    idleList // unpinned entries, least recently used first (by idleSince)
	open    int      // open files, including forgotten ones still pinned
	// opening is the opens and creates in flight, by path (chained by
	// cachedFile.nextOpening): a forget marks them forgotten.
	opening map[fileKey]*cachedFile
}

type fileKey struct {
	fs   vfs.FS
	path string
}

// cachedFile is one open file; refs counts its pins. Before its file is
// open it is an open or create in flight (in FileCache.opening), forgotten
// once the path was forgotten since it started. Fields other than f and
// key are guarded by FileCache.mu; f is set before the entry is inserted.
type cachedFile struct {
	key       fileKey
	f         vfs.File
	refs      int
	forgotten bool      // not in entries (or not to be); closed at refs == 0
	idleSince time.Time // when refs last fell to 0 (monotonic clock)
	// prev and next link it in FileCache.idle while refs == 0 and not
	// forgotten; nextOpening chains the opens in flight of one path.
	prev, next, nextOpening *cachedFile
}

// idleList is a doubly linked list of cachedFiles through their prev and
// next fields.
type idleList struct {
	front, back *cachedFile
	len         int
}

func (l *idleList) pushBack(e *cachedFile) {
	e.prev, e.next = l.back, nil
	if l.back != nil {
		l.back.next = e
	} else {
		l.front = e
	}
	l.back = e
	l.len++
}

func (l *idleList) remove(e *cachedFile) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.back = e.prev
	}
	e.prev, e.next = nil, nil
	l.len--
}

// NewFileCache returns a cache holding at most max open files (at least 1).
func NewFileCache(max int) *FileCache {
	if max < 1 {
		max = 1
	}
	return &FileCache{max: max, entries: make(map[fileKey]*cachedFile),
		opening: make(map[fileKey]*cachedFile)}
}

// OpenFiles reports the number of files the cache holds open.
func (c *FileCache) OpenFiles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// acquire returns path opened for reading and writing, pinned until release.
func (c *FileCache) acquire(fs vfs.FS, path string) (*cachedFile, error) {
	k := fileKey{fs, path}
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		c.pinLocked(e)
		c.mu.Unlock()
		return e, nil
	}
	op := c.startLocked(k)
	c.mu.Unlock()
	f, err := c.openRoom(func() (vfs.File, error) { return fs.Open(path) })
	c.mu.Lock()
	c.endLocked(op)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if e, ok := c.entries[k]; ok && !op.forgotten {
		// Opened meanwhile by another caller: share its handle.
		c.pinLocked(e)
		c.mu.Unlock()
		_ = f.Close()
		return e, nil
	}
	var buf [1]vfs.File
	closing := c.insertLocked(op, f, buf[:0])
	c.mu.Unlock()
	closeAll(closing)
	return op, nil
}

// pinLocked pins e, cached.
func (c *FileCache) pinLocked(e *cachedFile) {
	if e.refs == 0 {
		c.idle.remove(e)
	}
	e.refs++
}

// create creates (or truncates) path and returns it pinned.
func (c *FileCache) create(fs vfs.FS, path string) (*cachedFile, error) {
	k := fileKey{fs, path}
	c.mu.Lock()
	closing := c.forgetLocked(k, nil)
	op := c.startLocked(k)
	c.mu.Unlock()
	closeAll(closing)
	f, err := c.openRoom(func() (vfs.File, error) { return fs.Create(path) })
	c.mu.Lock()
	c.endLocked(op)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	// Whatever was cached under path meanwhile may be the file before
	// this create: the created one replaces it.
	closing = c.forgetLocked(k, nil)
	closing = c.insertLocked(op, f, closing)
	c.mu.Unlock()
	closeAll(closing)
	return op, nil
}

// openRoom runs open, and when the process is out of descriptors (EMFILE,
// or ENFILE for the system) closes half of the idle files and runs it once
// more. The bound comes from the process's descriptor limit less a reserve
// for everything else (the server's --max-open-files default), so segment
// files can be most of the process's descriptors: when the rest needs more
// than its reserve for a while (a burst of connections), the cache gives
// way instead of failing the append or read, which would make its log
// refuse every later change until recovered. It refills as it opens
// files; each time the limit is met again it gives half back again.
func (c *FileCache) openRoom(open func() (vfs.File, error)) (vfs.File, error) {
	f, err := open()
	if err == nil || !(errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
		return f, err
	}
	c.mu.Lock()
	var closing []vfs.File
	for n := (c.idle.len + 1) / 2; n > 0; n-- {
		closing = c.closeIdleLocked(c.idle.front, closing)
	}
	c.mu.Unlock()
	if len(closing) == 0 {
		return nil, err
	}
	closeAll(closing)
	return open()
}

// startLocked registers an open or create of k in flight: the entry it
// becomes once its file is open.
func (c *FileCache) startLocked(k fileKey) *cachedFile {
	op := &cachedFile{key: k, nextOpening: c.opening[k]}
	c.opening[k] = op
	return op
}

// endLocked unregisters it.
func (c *FileCache) endLocked(op *cachedFile) {
	p := c.opening[op.key]
	if p == op {
		if op.nextOpening == nil {
			delete(c.opening, op.key)
		} else {
			c.opening[op.key] = op.nextOpening
		}
	} else {
		for p.nextOpening != op {
			p = p.nextOpening
		}
		p.nextOpening = op.nextOpening
	}
	op.nextOpening = nil
}

// insertLocked pins e, an open just ended (endLocked), with its file f
// and appends to closing the files to close (after c.mu is released) to
// keep within max. An open forgotten while it was in flight is pinned but
// not cached: closed at its release.
func (c *FileCache) insertLocked(e *cachedFile, f vfs.File, closing []vfs.File) []vfs.File {
	e.f, e.refs = f, 1
	if !e.forgotten {
		c.entries[e.key] = e
	}
	c.open++
	return c.evictLocked(closing)
}

// evictLocked appends to closing the idle files to close to keep within
// max, taken out of the cache.
func (c *FileCache) evictLocked(closing []vfs.File) []vfs.File {
	for c.open > c.max && c.idle.len > 0 {
		closing = c.closeIdleLocked(c.idle.front, closing)
	}
	return closing
}

// closeIdleLocked takes the idle entry e out of the cache and appends its
// file to closing.
func (c *FileCache) closeIdleLocked(e *cachedFile, closing []vfs.File) []vfs.File {
	c.idle.remove(e)
	delete(c.entries, e.key)
	return c.closeLocked(e, closing)
}

// closeLocked counts e closed and appends its file to closing: the caller
// closes it once c.mu is released.
func (c *FileCache) closeLocked(e *cachedFile, closing []vfs.File) []vfs.File {
	c.open--
	return append(closing, e.f)
}

// closeAll closes files taken out of the cache.
func closeAll(files []vfs.File) {
	for _, f := range files {
		_ = f.Close() // a read-write handle: data was synced or is covered by recovery
	}
}

// release unpins e.
func (c *FileCache) release(e *cachedFile) {
	c.mu.Lock()
	e.refs--
	if e.refs > 0 {
		c.mu.Unlock()
		return
	}
	var buf [1]vfs.File
	closing := buf[:0]
	if e.forgotten {
		closing = c.closeLocked(e, closing)
	} else {
		e.idleSince = time.Now()
		c.idle.pushBack(e)
		closing = c.evictLocked(closing)
	}
	c.mu.Unlock()
	closeAll(closing)
}

// CloseIdle closes the cached files unused since before cutoff (a time
// from time.Now, whose monotonic clock it compares) and reports how many.
// A file in use (pinned) is never closed: it becomes idle at its last
// release. The next use of a closed file opens it again, as after an
// eviction. The idle list is in release order, so this looks at the files
// it closes and one more.
func (c *FileCache) CloseIdle(cutoff time.Time) int {
	c.mu.Lock()
	var closing []vfs.File
	for c.idle.len > 0 {
		e := c.idle.front
		if !e.idleSince.Before(cutoff) {
			break
		}
		closing = c.closeIdleLocked(e, closing)
	}
	c.mu.Unlock()
	closeAll(closing)
	return len(closing)
}

// forget drops path from the cache (before it is removed, renamed over or
// recreated); a pinned handle stays usable until its last release, and an
// open of path in flight is not cached.
func (c *FileCache) forget(fs vfs.FS, path string) {
	c.mu.Lock()
	closing := c.forgetLocked(fileKey{fs, path}, nil)
	c.mu.Unlock()
	closeAll(closing)
}

func (c *FileCache) forgetLocked(k fileKey, closing []vfs.File) []vfs.File {
	for op := c.opening[k]; op != nil; op = op.nextOpening {
		op.forgotten = true
	}
	e, ok := c.entries[k]
	if !ok {
		return closing
	}
	delete(c.entries, k)
	e.forgotten = true
	if e.refs == 0 {
		c.idle.remove(e)
		closing = c.closeLocked(e, closing)
	}
	return closing
}

// forgetAll forgets paths of fs; Close uses it so a closed log holds nothing.
func (c *FileCache) forgetAll(fs vfs.FS, paths []string) {
	c.mu.Lock()
	var closing []vfs.File
	for _, p := range paths {
		closing = c.forgetLocked(fileKey{fs, p}, closing)
	}
	c.mu.Unlock()
	closeAll(closing)
}
