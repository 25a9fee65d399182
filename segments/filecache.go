package segments

import (
	"container/list"
	"sync"
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
// A FileCache is safe for concurrent use.
type FileCache struct {
	max int

	mu      sync.Mutex // guards the fields below; taken after any Log.mu
	entries map[fileKey]*cachedFile
	idle    *list.List // unpinned entries, least recently used first (by idleSince)
	open    int        // open files, including forgotten ones still pinned
}

type fileKey struct {
	fs   vfs.FS
	path string
}

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
	return &FileCache{max: max, entries: make(map[fileKey]*cachedFile), idle: list.New()}
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
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		if e.refs == 0 {
			c.idle.Remove(e.elem)
			e.elem = nil
		}
		e.refs++
		return e, nil
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	return c.insertLocked(k, f), nil
}

// create creates (or truncates) path and returns it pinned.
func (c *FileCache) create(fs vfs.FS, path string) (*cachedFile, error) {
	k := fileKey{fs, path}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(k)
	f, err := fs.Create(path)
	if err != nil {
		return nil, err
	}
	return c.insertLocked(k, f), nil
}

func (c *FileCache) insertLocked(k fileKey, f vfs.File) *cachedFile {
	e := &cachedFile{key: k, f: f, refs: 1}
	c.entries[k] = e
	c.open++
	c.evictLocked()
	return e
}

func (c *FileCache) evictLocked() {
	for c.open > c.max && c.idle.Len() > 0 {
		e := c.idle.Remove(c.idle.Front()).(*cachedFile)
		e.elem = nil
		delete(c.entries, e.key)
		c.closeLocked(e)
	}
}

func (c *FileCache) closeLocked(e *cachedFile) {
	c.open--
	_ = e.f.Close() // a read-write handle: data was synced or is covered by recovery
}

// release unpins e.
func (c *FileCache) release(e *cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs > 0 {
		return
	}
	if e.forgotten {
		c.closeLocked(e)
		return
	}
	e.idleSince = time.Now()
	e.elem = c.idle.PushBack(e)
	c.evictLocked()
}

// CloseIdle closes the cached files unused since before cutoff (a time
// from time.Now, whose monotonic clock it compares) and reports how many.
// A file in use (pinned) is never closed: it becomes idle at its last
// release. The next use of a closed file opens it again, as after an
// eviction. The idle list is in release order, so this looks at the files
// it closes and one more.
func (c *FileCache) CloseIdle(cutoff time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for c.idle.Len() > 0 {
		e := c.idle.Front().Value.(*cachedFile)
		if !e.idleSince.Before(cutoff) {
			break
		}
		c.idle.Remove(e.elem)
		e.elem = nil
		delete(c.entries, e.key)
		c.closeLocked(e)
		n++
	}
	return n
}

// forget drops path from the cache (before it is removed, renamed over or
// recreated); a pinned handle stays usable until its last release.
func (c *FileCache) forget(fs vfs.FS, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(fileKey{fs, path})
}

func (c *FileCache) forgetLocked(k fileKey) {
	e, ok := c.entries[k]
	if !ok {
		return
	}
	delete(c.entries, k)
	e.forgotten = true
	if e.refs == 0 {
		c.idle.Remove(e.elem)
		e.elem = nil
		c.closeLocked(e)
	}
}

// forgetAll forgets paths of fs; Close uses it so a closed log holds nothing.
func (c *FileCache) forgetAll(fs vfs.FS, paths []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		c.forgetLocked(fileKey{fs, p})
	}
}
