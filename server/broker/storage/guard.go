package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Guard keeps --min-free-disk free on the filesystem that holds the
// partitions: appends are refused (ErrStorage) below it. The metadata
// store (badger) writes through memory-mapped files, and a page it first
// touches on a full filesystem kills the process with SIGBUS instead of
// returning an error; refusing data first leaves it room, so a node on a
// full disk stays up, reports itself and resumes when space returns.
//
// The free space is measured with statfs after every CheckBytes admitted
// (and at most every CheckEvery while below the reserve), so it can be
// overshot by about that much plus what is in flight. A nil Guard admits
// everything.
type Guard struct {
	dir string
	min int64 // --min-free-disk; capped at a tenth of the filesystem

	since atomic.Int64 // bytes admitted since the last measure
	low   atomic.Bool
	mu    sync.Mutex // serialises measures
	last  time.Time  // guarded by mu
	free  int64      // guarded by mu: the last measure
	limit int64      // guarded by mu: the reserve for this filesystem

	statfs func(dir string) (free, total int64, err error) // tests replace it
}

// CheckBytes and CheckEvery bound how often admits measure the disk.
const (
	CheckBytes = 1 << 20
	CheckEvery = 100 * time.Millisecond
)

// NewGuard keeps min bytes free on the filesystem holding dir (0: none).
func NewGuard(dir string, min int64) *Guard {
	return &Guard{dir: dir, min: min, statfs: statfs}
}

// NewGuardStatfs is NewGuard measuring the filesystem with measure
// instead of statfs(2): for the tests of what a low disk does elsewhere.
func NewGuardStatfs(dir string, min int64, measure func(dir string) (free, total int64, err error)) *Guard {
	return &Guard{dir: dir, min: min, statfs: measure}
}

// Admit is called before n bytes are appended; it returns an ErrStorage
// while the filesystem is below the reserve. Safe for concurrent use.
func (g *Guard) Admit(n int) error {
	if g == nil || g.min <= 0 {
		return nil
	}
	if g.since.Add(int64(n)) >= CheckBytes || g.low.Load() {
		g.Measure(false)
	}
	if g.low.Load() {
		return g.Err()
	}
	return nil
}

// capReserve is the reserve kept of want on a filesystem of total bytes:
// at most a tenth of it.
func capReserve(want, total int64) int64 { return min(want, total/10) }

// Reserve is what a Guard of want keeps free on the filesystem holding
// dir: want, capped at a tenth of the filesystem; ok false when it cannot
// be measured.
func Reserve(dir string, want int64) (reserve int64, ok bool) {
	_, total, err := statfs(dir)
	if err != nil {
		return 0, false
	}
	return capReserve(want, total), true
}

// IsLow reports whether the last measure was below the reserve.
func (g *Guard) IsLow() bool { return g != nil && g.low.Load() }

// Measure runs statfs unless one ran within CheckEvery with fewer than
// CheckBytes admitted since (force: always).
func (g *Guard) Measure(force bool) {
	if g == nil || g.min <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !force && g.since.Load() < CheckBytes && time.Since(g.last) < CheckEvery {
		return
	}
	g.since.Store(0)
	g.last = time.Now()
	free, total, err := g.statfs(g.dir)
	if err != nil {
		return // the appends themselves will say what is wrong
	}
	g.free, g.limit = free, capReserve(g.min, total)
	g.low.Store(free < g.limit)
}

// Err describes the refusal (nil while above the reserve).
func (g *Guard) Err() error {
	if !g.IsLow() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Errorf("%w: the disk holding the partitions has %d bytes free, below the %d kept for the metadata (--min-free-disk); writes resume by themselves once space is freed",
		ErrStorage, g.free, g.limit)
}
