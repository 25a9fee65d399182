package segments

import (
	"container/list"
	"errors"
	"slices"
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
type FileCache struct {
	max int

	mu      sync.Mutex // guards the fields below; taken after any Log.mu
	entries map[fileKey]*cachedFile
	idle    *list.List // unpinned entries, least recently used first (by idleSince)
	open    int        // open files, including forgotten ones still pinned
	// opening is the opens and creates in flight, by path: a forget marks
	// them stale.
	opening map[fileKey][]*opening
}

type fileKey struct {
	fs   vfs.FS
	path string
}

// opening is one open or create in flight; stale (guarded by
// FileCache.mu) once the path was forgotten since it started.
type opening struct{ stale bool }

// cachedFile is one open file; refs counts its pins. Fields other than f and
// key are guarded by FileCache.mu.
type cachedFile struct {
	key       fileKey
	f         vfs.File
	refs      int
	elem      *list.Element // in idle while refs == 0 and not forgotten
	forgotten bool          // no longer in entries; closed at refs == 0
	idleSince time.Time     // when refs last fell to 0 (monotonic clock)
}

// NewFileCache returns a cache holding at most max open files (at least 1).
func NewFileCache(max int) *FileCache {
	if max < 1 {
		max = 1
	}
	return &FileCache{max: max, entries: make(map[fileKey]*cachedFile), idle: list.New(),
		opening: make(map[fileKey][]*opening)}
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
		if e.refs == 0 {
			c.idle.Remove(e.elem)
			e.elem = nil
		}
		e.refs++
		c.mu.Unlock()
		return e, nil
	}
	op := c.startLocked(k)
	c.mu.Unlock()
	f, err := c.openRoom(func() (vfs.File, error) { return fs.Open(path) })
	c.mu.Lock()
	c.endLocked(k, op)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if e, ok := c.entries[k]; ok && !op.stale {
		// Opened meanwhile by another caller: share its handle.
		if e.refs == 0 {
			c.idle.Remove(e.elem)
			e.elem = nil
		}
		e.refs++
		c.mu.Unlock()
		_ = f.Close()
		return e, nil
	}
	e, closing := c.insertLocked(k, f, op.stale)
	c.mu.Unlock()
	closeAll(closing)
	return e, nil
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
	c.endLocked(k, op)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	// Whatever was cached under path meanwhile may be the file before
	// this create: the created one replaces it.
	closing = c.forgetLocked(k, nil)
	e, more := c.insertLocked(k, f, op.stale)
	c.mu.Unlock()
	closeAll(closing)
	closeAll(more)
	return e, nil
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
	for n := (c.idle.Len() + 1) / 2; n > 0; n-- {
		closing = c.closeIdleLocked(c.idle.Front().Value.(*cachedFile), closing)
	}
	c.mu.Unlock()
	if len(closing) == 0 {
		return nil, err
	}
	closeAll(closing)
	return open()
}

// startLocked registers an open or create of k in flight.
func (c *FileCache) startLocked(k fileKey) *opening {
	op := &opening{}
	c.opening[k] = append(c.opening[k], op)
	return op
}

// endLocked unregisters it.
func (c *FileCache) endLocked(k fileKey, op *opening) {
	ops := slices.DeleteFunc(c.opening[k], func(o *opening) bool { return o == op })
	if len(ops) == 0 {
		delete(c.opening, k)
	} else {
		c.opening[k] = ops
	}
}

// insertLocked pins f, opened as k, and returns the files to close (after
// c.mu is released) to keep within max. A stale open (k was forgotten
// while it was in flight) is pinned but not cached: closed at its release.
func (c *FileCache) insertLocked(k fileKey, f vfs.File, stale bool) (*cachedFile, []vfs.File) {
	e := &cachedFile{key: k, f: f, refs: 1, forgotten: stale}
	if !stale {
		c.entries[k] = e
	}
	c.open++
	return e, c.evictLocked(nil)
}

// evictLocked appends to closing the idle files to close to keep within
// max, taken out of the cache.
func (c *FileCache) evictLocked(closing []vfs.File) []vfs.File {
	for c.open > c.max && c.idle.Len() > 0 {
		closing = c.closeIdleLocked(c.idle.Front().Value.(*cachedFile), closing)
	}
	return closing
}

// closeIdleLocked takes the idle entry e out of the cache and appends its
// file to closing.
func (c *FileCache) closeIdleLocked(e *cachedFile, closing []vfs.File) []vfs.File {
	c.idle.Remove(e.elem)
	e.elem = nil
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
	var closing []vfs.File
	if e.forgotten {
		closing = c.closeLocked(e, nil)
	} else {
		e.idleSince = time.Now()
		e.elem = c.idle.PushBack(e)
		closing = c.evictLocked(nil)
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
	for c.idle.Len() > 0 {
		e := c.idle.Front().Value.(*cachedFile)
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
	for _, op := range c.opening[k] {
		op.stale = true
	}
	e, ok := c.entries[k]
	if !ok {
		return closing
	}
	delete(c.entries, k)
	e.forgotten = true
	if e.refs == 0 {
		c.idle.Remove(e.elem)
		e.elem = nil
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
