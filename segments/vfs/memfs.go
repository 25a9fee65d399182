package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that remembers what was made durable: file bytes
// by File.Sync, and creations, renames and removals by SyncDir. Crash returns
// the filesystem a power cut would leave. Directories themselves are durable
// as soon as they are made. Safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex // guards dirs and the entries of every memDir
	dirs map[string]*memDir
}

type memDir struct {
	entries map[string]*memNode // current
	synced  map[string]*memNode // as of the last SyncDir
}

type memNode struct {
	mu      sync.Mutex // guards the fields below
	data    []byte
	synced  []byte
	modTime time.Time
}

// NewMemFS returns an empty in-memory filesystem with a root directory.
func NewMemFS() *MemFS {
	m := &MemFS{dirs: make(map[string]*memDir)}
	m.dirs["/"] = newMemDir()
	m.dirs["."] = newMemDir()
	return m
}

func newMemDir() *memDir {
	return &memDir{entries: make(map[string]*memNode), synced: make(map[string]*memNode)}
}

func memPathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// parentLocked returns the directory holding name and the base name.
func (m *MemFS) parentLocked(op, name string) (*memDir, string, error) {
	name = filepath.Clean(name)
	d, ok := m.dirs[filepath.Dir(name)]
	if !ok {
		return nil, "", memPathErr(op, name, fs.ErrNotExist)
	}
	return d, filepath.Base(name), nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("create", name)
	if err != nil {
		return nil, err
	}
	n := &memNode{modTime: time.Now()}
	if old, ok := d.entries[base]; ok {
		// Truncating an existing file keeps its identity, as on a disk.
		old.mu.Lock()
		old.data, old.modTime = nil, time.Now()
		old.mu.Unlock()
		n = old
	}
	d.entries[base] = n
	return &memFile{n: n}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, memPathErr("open", name, fs.ErrNotExist)
	}
	return &memFile{n: n}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	if _, ok := d.entries[base]; !ok {
		return memPathErr("remove", name, fs.ErrNotExist)
	}
	delete(d.entries, base)
	return nil
}

// RemoveAll implements FS; the removal is durable at once.
func (m *MemFS) RemoveAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	for p := range m.dirs {
		if p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) {
			delete(m.dirs, p)
		}
	}
	if d, base, err := m.parentLocked("removeall", dir); err == nil {
		delete(d.entries, base)
		delete(d.synced, base)
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parentLocked("rename", oldname)
	if err != nil {
		return err
	}
	nd, nb, err := m.parentLocked("rename", newname)
	if err != nil {
		return err
	}
	n, ok := od.entries[ob]
	if !ok {
		return memPathErr("rename", oldname, fs.ErrNotExist)
	}
	delete(od.entries, ob)
	nd.entries[nb] = n
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, ok := m.dirs[p]; ok {
			return nil
		}
		m.dirs[p] = newMemDir()
	}
}

// List implements FS: files and subdirectories.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	d, ok := m.dirs[dir]
	if !ok {
		return nil, memPathErr("list", dir, fs.ErrNotExist)
	}
	var names []string
	for name := range d.entries {
		names = append(names, name)
	}
	for p := range m.dirs {
		if p != dir && filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, ok := m.dirs[name]; ok {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	d, base, err := m.parentLocked("stat", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, memPathErr("stat", name, fs.ErrNotExist)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return memInfo{name: base, size: int64(len(n.data)), mod: n.modTime}, nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.dirs[filepath.Clean(dir)]
	if !ok {
		return memPathErr("syncdir", dir, fs.ErrNotExist)
	}
	d.synced = make(map[string]*memNode, len(d.entries))
	for k, v := range d.entries {
		d.synced[k] = v
	}
	return nil
}

// OpenFSSync implements FSSyncer. The handle's Sync makes every
// directory's entries and every file's bytes durable, as SyncDir and
// File.Sync of each would.
func (m *MemFS) OpenFSSync(dir string) (FSSync, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[filepath.Clean(dir)]; !ok {
		return nil, memPathErr("open", dir, fs.ErrNotExist)
	}
	return memFSSync{m}, nil
}

type memFSSync struct{ m *MemFS }

func (h memFSSync) Close() error { return nil }

func (h memFSSync) Sync() error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	for _, d := range h.m.dirs {
		d.synced = make(map[string]*memNode, len(d.entries))
		for k, n := range d.entries {
			d.synced[k] = n
			n.mu.Lock()
			n.synced = append(n.synced[:0:0], n.data...)
			n.mu.Unlock()
		}
	}
	return nil
}

// Crash returns the filesystem left by a power cut now: directories hold
// the entries of their last SyncDir and files their last fsynced bytes. With
// a non-nil rng, a file whose unsynced bytes extend its synced ones keeps a
// random prefix of them, as a torn write would. m itself is unchanged.
func (m *MemFS) Crash(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &MemFS{dirs: make(map[string]*memDir, len(m.dirs))}
	copies := make(map[*memNode]*memNode)
	for p, d := range m.dirs {
		nd := newMemDir()
		for name, n := range d.synced {
			cn, ok := copies[n]
			if !ok {
				cn = n.crashCopy(rng)
				copies[n] = cn
			}
			nd.entries[name], nd.synced[name] = cn, cn
		}
		c.dirs[p] = nd
	}
	return c
}

func (n *memNode) crashCopy(rng *rand.Rand) *memNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	data := append([]byte(nil), n.synced...)
	if rng != nil && len(n.data) > len(n.synced) && string(n.data[:len(n.synced)]) == string(n.synced) {
		data = append(data, n.data[len(n.synced):len(n.synced)+rng.IntN(len(n.data)-len(n.synced)+1)]...)
	}
	return &memNode{data: data, synced: append([]byte(nil), data...), modTime: n.modTime}
}

type memInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o700
	}
	return 0o600
}

// memFile is an open MemFS file.
type memFile struct {
	n      *memNode
	mu     sync.Mutex // guards closed
	closed bool
}

var errMemClosed = errors.New("segments: memfs: file closed")

func (f *memFile) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errMemClosed
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check(); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	if err := f.check(); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = append(f.n.synced[:0:0], f.n.data...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errMemClosed
	}
	f.closed = true
	return nil
}
