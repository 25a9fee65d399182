package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/topicconfig"

	"github.com/runnel/runnel/segments/vfs"
)

// Lazy partition logs (issue 19). A hosted partition is a Partition from
// the moment the metadata places it here, but its log is opened (created,
// for a new partition) only on first use: a produce or read through
// Broker.Partition or Lookup, a follower's fetch of it, this broker
// following it (fetcher.go), a describe of a log that has records, or the
// retention sweep below. So creating a topic touches no disk on the broker
// (nothing is created under Broker.mu: the directory is made by the first
// use, under the partition's own lazyLog.mu), and a restart reads the
// metadata image, not every log directory: a log open at an unclean stop is
// recovered by segments.Open at its first use (from its recovery point, as
// before). An unopened log holds no descriptor, index or segment state;
// once opened, a log stays open until its partition goes away or the broker
// closes. Its descriptors do not: segments.FileCache bounds those of all
// open logs (--max-open-files), and each maintenance round closes the
// files no one used for Config.LogIdleTimeout (closeIdleFiles), so a log
// read once and left idle gives its descriptors back. A file pinned by a
// reader, writer or follower in flight is never closed under it (the
// cache's pin count), and the next use opens it again. The log's indexes
// and offsets stay in memory: they are what lets that next use skip
// recovery.
//
// The loops that walk partitions (maintenance, ISR, storage) walk the open
// ones only (Broker.open; maintenance only those changed or due,
// maintenance.go, the storage loop only the failed ones, storage.go):
// nothing can change in a log nobody opened.
// Time can, though: retention and segment.ms apply to an unopened log as
// soon as it has a sealed segment, or its one segment has records and is
// older than segment.ms. The retention sweep (sweepUnopened, once per
// maintenance round) looks at a bounded batch of unopened logs' directories
// (one listing each, remembered: an unopened log does not change) and opens
// the few that retention or a time roll could act on, at most
// sweepOpensPerRound per round; Maintain then runs on them as on any open
// log.
const (
	sweepDirsPerRound  = 2048
	sweepOpensPerRound = 64
)

// lazyLog is a partition's log, opened on first use.
type lazyLog struct {
	mu  sync.Mutex                   // serializes opening, closing and deleting
	log atomic.Pointer[segments.Log] // nil until opened; kept (closed) after close or delete
	// cfg is the log's config, set by reconcile: an unopened log opens
	// with it, an open one was given it.
	cfg atomic.Pointer[segments.Config]
	// gone is why the log never opens again (closed or deleted); guarded
	// by mu.
	gone error
	// deleted is set under Broker.mu when the replica is deleted, before
	// a deletion worker takes mu to delete the log (deletions.go): from
	// then on it never opens.
	deleted atomic.Bool
	// owner opens it; nil for a partition made with its log open.
	owner *Broker
	// peeked is what a look at the unopened log's directory found
	// (peekLog); nil until one looked.
	peeked atomic.Pointer[logPeek]
}

// log is the partition's open log, nil until ensureOpen opened it. Every
// path that uses it opened it first: Broker.Partition and Lookup, the
// fetcher, and the loops over Broker.open.
func (p *Partition) log() *segments.Log { return p.lazy.log.Load() }

// ensureOpen opens the partition's log if it is not open yet (creating it
// when its directory does not exist) and sets the high watermark from its
// checkpoint. It takes the partition's lazyLog.mu, never Broker.mu.
func (p *Partition) ensureOpen() error {
	if p.log() != nil {
		return nil
	}
	// An older topic's log of this name being deleted is gone before
	// this one opens. Waited for without mu: the deletion worker of this
	// very partition takes mu (deletions.go); one that starts after the
	// wait set deleted first, seen below.
	if p.lazy.deleted.Load() { // its deletion may hold mu
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, p.topic, p.index)
	}
	if b := p.lazy.owner; b != nil {
		if dir, err := b.partitionDir(p.topic, p.index); err == nil {
			b.waitDeleted(dir)
		}
	}
	p.lazy.mu.Lock()
	defer p.lazy.mu.Unlock()
	if p.log() != nil {
		return nil
	}
	if p.lazy.gone != nil {
		return fmt.Errorf("%w: %s-%d", p.lazy.gone, p.topic, p.index)
	}
	if p.lazy.deleted.Load() {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, p.topic, p.index)
	}
	b := p.lazy.owner
	cfg := p.lazy.cfg.Load()
	// A failed log is listed for the storage loop when it fails
	// (storage.go), whichever operation failed.
	log, err := b.openLog(p.topic, p.topicID, p.index, *cfg, func() { b.failed.add(p) })
	if err != nil {
		b.logger.Warn("open partition log", "topic", p.topic, "partition", p.index, "err", err)
		return storageErr(p.topic, p.index, err)
	}
	if err := p.loadHWM(log); err != nil {
		log.Close()
		b.logger.Warn("open partition log", "topic", p.topic, "partition", p.index, "err", err)
		return storageErr(p.topic, p.index, err)
	}
	p.lazy.log.Store(log)
	// A config reconcile stored while this opened was meant for this log.
	if now := p.lazy.cfg.Load(); now != cfg {
		if err := log.SetConfig(*now); err != nil {
			b.logger.Warn("partition config", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
	b.addOpened(p)
	p.touchLog()       // maintained next round, as every log was
	p.leaderAppended() // a leader's high watermark follows its log end and ISR
	return nil
}

// setLogConfig gives the log cfg now if it is open, or when it opens.
func (p *Partition) setLogConfig(cfg *segments.Config) error {
	p.lazy.cfg.Store(cfg)
	if log := p.log(); log != nil {
		defer p.touchLog() // a new retention acts within a round
		return log.SetConfig(*cfg)
	}
	return nil
}

// deleteLog deletes the partition's log, opened or not, and makes sure it
// never opens again. Called by a deletion worker (deletions.go), without
// Broker.mu.
func (p *Partition) deleteLog() error {
	p.lazy.mu.Lock()
	defer p.lazy.mu.Unlock()
	p.lazy.gone = ErrUnknownTopic
	if b := p.lazy.owner; b != nil {
		b.removeOpened(p)
	}
	if log := p.log(); log != nil {
		return log.Delete()
	}
	dir, err := p.lazy.owner.partitionDir(p.topic, p.index)
	if err != nil {
		return err
	}
	return p.lazy.owner.fs().RemoveAll(dir)
}

// logPeek is what a listing of an unopened log's directory tells.
type logPeek struct {
	exists   bool
	segments int   // segment files
	base     int64 // the first segment's base offset
	size     int64 // bytes of all segment files
	modTime  time.Time
}

// empty reports a log holding no record: no directory, or one empty
// segment (its start, end and high watermark all at its base).
func (lp *logPeek) empty() bool { return !lp.exists || lp.segments == 1 && lp.size == 0 }

// peekLog lists the unopened log's directory once and remembers what it
// found: nothing writes an unopened log.
func (p *Partition) peekLog() (*logPeek, error) {
	if lp := p.lazy.peeked.Load(); lp != nil {
		return lp, nil
	}
	dir, err := p.lazy.owner.partitionDir(p.topic, p.index)
	if err != nil {
		return nil, err
	}
	p.lazy.owner.waitDeleted(dir) // not an older topic's log being deleted
	lp, err := peekDir(dir)
	if err != nil {
		return nil, err
	}
	p.lazy.peeked.Store(lp)
	return lp, nil
}

// peekDir is what a listing of a log's directory tells.
func peekDir(dir string) (*logPeek, error) {
	lp := &logPeek{base: -1}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		lp.exists = true
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".log")
			if !ok || e.IsDir() {
				continue
			}
			base, err := strconv.ParseInt(name, 10, 64)
			if err != nil {
				continue
			}
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			lp.segments++
			lp.size += info.Size()
			if lp.base < 0 || base < lp.base {
				lp.base = base
			}
			if mt := info.ModTime(); lp.modTime.IsZero() || mt.Before(lp.modTime) {
				lp.modTime = mt
			}
		}
	}
	switch {
	case !lp.exists:
		lp = &noLogDir // most of a million idle partitions: one shared answer
	case lp.segments == 1 && lp.size == 0 && lp.base == 0:
		lp = &emptyLogDir
	}
	return lp, nil
}

// The two answers most unopened logs give, shared rather than allocated
// per partition.
var (
	noLogDir    = logPeek{base: -1}
	emptyLogDir = logPeek{exists: true, segments: 1}
)

// SizeBytes is the bytes the partition's segments take, without opening
// its log.
func (p *Partition) SizeBytes() int64 {
	if log := p.log(); log != nil {
		return log.Size()
	}
	lp, err := p.peekLog()
	if err != nil {
		if log := p.openLog(); log != nil {
			return log.Size()
		}
		return 0
	}
	return lp.size
}

// Offsets returns the log start and end offsets and the high watermark. A
// log that is not open yet and holds no record is not opened for it.
func (p *Partition) Offsets() (start, end, hwm int64, err error) {
	if p.log() == nil {
		if lp, err := p.peekLog(); err == nil && lp.empty() {
			base := max(lp.base, 0)
			return base, base, base, nil
		}
		if err := p.ensureOpen(); err != nil {
			return 0, 0, 0, err
		}
	}
	log := p.log()
	return log.StartOffset(), log.EndOffset(), p.hwm.Load(), nil
}

// retentionDue reports whether Maintain could act on this unopened log at
// now under cfg: it has a sealed segment (retention, compaction), or its
// one segment has records and is older than segment.ms (a time roll).
func (lp *logPeek) retentionDue(cfg segments.Config, now time.Time) bool {
	switch {
	case lp.segments > 1:
		return true
	case lp.segments == 1 && lp.size > 0:
		return cfg.SegmentMs > 0 && now.Sub(lp.modTime).Milliseconds() >= cfg.SegmentMs
	}
	return false
}

// closeIdleFiles closes the partitions' files unused for logIdleTimeout
// (see the top of this file). It runs on the maintenance round and takes
// no broker lock: the FileCache has its own, held only to close files no
// one has pinned.
func (b *Broker) closeIdleFiles() {
	if b.logIdleTimeout <= 0 || b.logOpts.Files == nil {
		return
	}
	if n := b.logOpts.Files.CloseIdle(time.Now().Add(-b.logIdleTimeout)); n > 0 {
		b.logger.Debug("closed idle partition files", "files", n, "idle", b.logIdleTimeout)
	}
}

// addOpened and removeOpened keep the set of partitions with an open log.
// Called with p's lazyLog.mu held.
func (b *Broker) addOpened(p *Partition) {
	if p.lazy.gone == nil {
		b.open.add(p)
		b.maintDue.admit(p)
		b.isrDue.admit(p)
		p.askISR() // asked at the next ISR round, as every opened log was
		b.hwms.opened(p)
	}
}

func (b *Broker) removeOpened(p *Partition) {
	b.open.remove(p)
	b.maintDue.evict(p)
	b.isrDue.evict(p)
	b.hwms.closed(p)
}

// opened returns the hosted partitions whose log is open, in a new slice
// (the loops walk b.open instead: openlogs.go).
func (b *Broker) opened() []*Partition { return b.open.snapshot() }

// sweepUnopened is one maintenance round's share of the retention sweep
// (see the top of this file). It walks the partitions directory, a batch
// of entries per round: a log that has no directory holds nothing to
// delete, and a partition not made since the start (hosting.go) is looked
// at without making it. It runs on the run goroutine only (or once Start's
// goroutines stopped), which owns b.sweepDir.
func (b *Broker) sweepUnopened(now time.Time) {
	if n := b.hostedCount.Load(); n >= 0 && int64(b.open.len()) >= n {
		return // every hosted log is open (not counted again for this)
	}
	if b.sweepDir == nil {
		d, err := os.Open(b.dir)
		if err != nil {
			b.logger.Warn("retention sweep: list partitions", "err", err)
			return
		}
		b.sweepDir = d
	}
	entries, err := b.sweepDir.ReadDir(sweepDirsPerRound)
	if err != nil || len(entries) < sweepDirsPerRound {
		b.endSweep() // the next round starts a new pass
	}
	opens := 0
	for _, e := range entries {
		if opens >= sweepOpensPerRound {
			// The batch's remaining logs that need opening are seen
			// next pass; start that pass over now rather than after
			// every other log.
			b.endSweep()
			return
		}
		if !e.IsDir() {
			continue
		}
		if b.sweepOne(e.Name(), now) {
			opens++
		}
	}
}

// sweepOne opens the log in the partition directory name if it is hosted
// here, not open, and retention or a time roll could act on it; it
// reports whether it tried.
func (b *Broker) sweepOne(name string, now time.Time) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	idx, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil {
		return false
	}
	topic := name[:i]
	b.mu.RLock()
	p, err := b.madeLocked(topic, int32(idx))
	var cfg segments.Config
	if err == nil && p == nil {
		t, _ := b.img.Topics.Lookup(topic)
		cfg = topicconfig.LogConfig(t.Configs)
	}
	b.mu.RUnlock()
	var lp *logPeek
	switch {
	case err != nil:
		return false // not hosted here: removeStrayDirs' business
	case p != nil && p.log() != nil:
		return false // open: Maintain runs on it
	case p != nil:
		cfg = *p.lazy.cfg.Load()
		lp, err = p.peekLog()
	default:
		lp, err = peekDir(filepath.Join(b.dir, name))
	}
	if err != nil || !lp.retentionDue(cfg, now) {
		return false
	}
	p, err = b.Lookup(topic, int32(idx)) // made and opened now
	if err != nil {
		return true // deleted meanwhile, or a failing disk (logged)
	}
	p.lazy.peeked.Store(nil)
	return true
}

// endSweep closes the retention sweep's listing: the next round lists the
// partitions directory from its start.
func (b *Broker) endSweep() {
	if b.sweepDir != nil {
		b.sweepDir.Close()
		b.sweepDir = nil
	}
}

// fs is the partitions' filesystem.
func (b *Broker) fs() vfs.FS {
	if b.logOpts.FS != nil {
		return b.logOpts.FS
	}
	return vfs.OSFS()
}

// removeStrayDirs deletes partition directories of topics deleted while
// this node was down (and of replicas moved away meanwhile). It runs in the
// background after start: it lists the partitions directory in batches, and
// checks each entry under Broker.mu (read) on its own, so a million
// directories hold neither the start nor the lock that produce and fetch
// lookups take.
func (b *Broker) removeStrayDirs(ctx context.Context) error {
	d, err := os.Open(b.dir)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(1024)
		for _, e := range entries {
			if e.IsDir() {
				if err := b.removeIfStray(e.Name()); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) || len(entries) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list partitions: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// removeIfStray removes the partition directory name unless a hosted
// partition owns it. Broker.mu is held (read) across the check and the
// removal, so no reconcile hosts that partition meanwhile.
func (b *Broker) removeIfStray(name string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if idx, err := strconv.ParseInt(name[i+1:], 10, 32); err == nil && b.placedLocked(name[:i], int32(idx)) {
			return nil
		}
	}
	b.logger.Info("removing partition directory not in the metadata", "dir", name)
	if err := os.RemoveAll(filepath.Join(b.dir, name)); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
