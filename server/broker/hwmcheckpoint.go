package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/segments/vfs"
	"github.com/runnel/runnel/server/broker/hwcheckpoint"
)

// The high-watermark checkpoint (issue 19). A restarted leader must not
// expose records that were never replicated, so every partition's high
// watermark is saved, and a log opens with the saved one (at most its
// end). Each maintenance round wrote each changed mark to its partition's
// own file, atomically: three fsyncs a partition, the largest steady fsync
// cost left at 30,000 active partitions. Now, as Kafka's
// replication-offset-checkpoint does per log directory, one file in the
// partitions directory, hwmCheckpointFile (package hwcheckpoint's format,
// with a CRC), holds the mark of every partition here whose mark is
// known: the open logs' current marks and, for the logs not opened since
// the start, the marks read from the file then (hwmCheckpoint.saved: the
// file never forces an open, nor forgets an unopened log's mark). It is
// written whole, atomically (segments.WriteFileAtomic: two fsyncs and a
// rename), by hwmCheckpointLoop every --high-watermark-checkpoint-interval
// when a mark or the set of partitions changed, and by Close after the
// logs closed: O(1) fsyncs a round whatever the number of partitions.
//
// A mark that goes down (a follower cut its log below it, a reset to the
// leader's log start, a failed log's recovery cut its tail, or a log
// opened shorter than its saved mark after a power cut) is written at
// once, before the log takes records above it (syncLoweredHWM): with the
// higher mark still saved, records the new leader appended in its place
// and that nobody else holds yet would be exposed after a crash and a
// restart. Concurrent lowered marks share one write (a write covers every
// request made before it read the marks).
//
// Upgrade: the previous release kept the mark in each partition's
// directory (legacyHWMFile, one line "<offset> <crc32c of the 8-byte
// big-endian offset>"). A log with no entry in the directory checkpoint
// opens with that file's mark, and the file is removed once a checkpoint
// holding the log's mark is durable. No checkpoint, or one that does not
// decode (torn, corrupt, another version), is warned about: each log
// opens with its mark at its log start (no record exposed), and a leader
// recomputes it from its in-sync replicas.
const (
	hwmCheckpointFile = "high-watermark-checkpoint"
	legacyHWMFile     = "high-watermark"

	// DefaultHighWatermarkCheckpointInterval is Kafka's
	// replica.high.watermark.checkpoint.interval.ms.
	DefaultHighWatermarkCheckpointInterval = 5 * time.Second
)

// partKey names a partition in the checkpoint.
type partKey struct {
	topic string
	index int32
}

// savedMark is a partition's mark as the checkpoint holds it, with the id
// of its topic: a topic created again under the same name is another
// topic, and gets none of the old one's marks.
type savedMark struct {
	id [16]byte
	hw int64
}

// hwmCheckpoint is the broker's high-watermark checkpoint file.
type hwmCheckpoint struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger

	// writeMu serializes the writes of the file; it is held across one
	// (no hot path takes it) and taken before marksMu.
	writeMu sync.Mutex
	// covered is the lowered-mark requests the last successful write
	// covered (guarded by writeMu).
	covered uint64
	// requested counts the lowered-mark requests (syncLoweredHWM).
	requested atomic.Uint64
	// bufs is the memory each write builds and encodes the checkpoint
	// in, and spare the array of the dirty list it took (cleared), kept
	// for the next write (guarded by writeMu: the writer's own).
	bufs  checkpointBufs
	spare []*Partition

	// marksMu guards table, dirty, changed and written; a leaf.
	marksMu sync.Mutex
	// table is what the file holds (hwmtable.go): the open logs, whose
	// current mark is written, and the marks saved for the others: read
	// at the start, of logs not opened since, and the lowered mark of a
	// log being opened.
	table *markTable
	// dirty is the open logs whose mark moved since the last write read
	// the marks (each with its hwmDirty set; hwmMoved): an unchanged
	// checkpoint costs nothing whatever the number of logs.
	dirty []*Partition
	// changed counts changes of the set of partitions (one deleted, an
	// entry dropped); written is its value at the last successful write.
	changed, written uint64
}

// loadHWMCheckpoint reads the partitions directory's checkpoint.
func loadHWMCheckpoint(fsys vfs.FS, dir string, logger *slog.Logger) *hwmCheckpoint {
	c := &hwmCheckpoint{fs: fsys, dir: dir, logger: logger, table: newMarkTable()}
	raw, err := segments.ReadFile(fsys, filepath.Join(dir, hwmCheckpointFile))
	if err == nil && raw == nil {
		return c // a new data directory, or the previous release's
	}
	var cp hwcheckpoint.Checkpoint
	if err == nil {
		cp, err = hwcheckpoint.Decode(raw)
	}
	if err != nil {
		logger.Warn("high-watermark checkpoint unreadable: partitions open with their marks at their log start, and leaders recompute them from their in-sync replicas",
			"file", filepath.Join(dir, hwmCheckpointFile), "err", err)
		c.changed++ // written again at the next round
		return c
	}
	for _, t := range cp {
		for _, p := range t.Partitions {
			c.table.update(partKey{t.Name, p.Index}, func(s *markSlot) {
				s.saved, s.hasSaved = savedMark{t.ID, p.HighWatermark}, true
			})
		}
	}
	return c
}

// savedMarks is the marks saved for logs (not the open logs' marks).
func (c *hwmCheckpoint) savedMarks() map[partKey]savedMark {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	out := map[partKey]savedMark{}
	c.table.each(func(k partKey, s *markSlot) {
		if s.hasSaved {
			out[k] = s.saved
		}
	})
	return out
}

// opened puts p's open log in the table: its mark is written from now on
// (the previous release's file of it goes after the next write).
func (c *hwmCheckpoint) opened(p *Partition) {
	c.marksMu.Lock()
	c.table.update(partKey{p.topic, p.index}, func(s *markSlot) { s.open = p })
	c.marksMu.Unlock()
	if p.hwmLegacy.Load() {
		p.hwmMoved()
	}
}

// closed takes p's log out of the table, if it is p's there (another
// replica of the name may have opened since).
func (c *hwmCheckpoint) closed(p *Partition) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	k := partKey{p.topic, p.index}
	if s := c.table.get(k); s != nil && s.open == p {
		c.table.update(k, func(s *markSlot) { s.open = nil })
		c.changed++
	}
}

// hwmMoved records that p's mark moved: the next checkpoint round writes.
func (p *Partition) hwmMoved() {
	b := p.lazy.owner
	if b == nil || p.hwmDirty.Load() || !p.hwmDirty.CompareAndSwap(false, true) {
		return
	}
	c := b.hwms
	c.marksMu.Lock()
	c.dirty = append(c.dirty, p)
	c.marksMu.Unlock()
}

// mark is the saved mark of topic's partition idx, if the checkpoint has
// one for this topic id.
func (c *hwmCheckpoint) mark(topic string, idx int32, id [16]byte) (int64, bool) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	s := c.table.get(partKey{topic, idx})
	if s == nil || !s.hasSaved || s.saved.id != id {
		return 0, false
	}
	return s.saved.hw, true
}

// setMark replaces a saved mark; it returns the function that puts the
// one before back.
func (c *hwmCheckpoint) setMark(topic string, idx int32, m savedMark) (undo func()) {
	k := partKey{topic, idx}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	var old savedMark
	var had bool
	c.table.update(k, func(s *markSlot) {
		old, had = s.saved, s.hasSaved
		s.saved, s.hasSaved = m, true
	})
	return func() {
		c.marksMu.Lock()
		defer c.marksMu.Unlock()
		if s := c.table.get(k); s != nil && s.hasSaved && s.saved == m {
			c.table.update(k, func(s *markSlot) { s.saved, s.hasSaved = old, had })
		}
	}
}

// forget drops the saved mark of a partition whose log is deleted; the
// next round writes the file without it.
func (c *hwmCheckpoint) forget(topic string, idx int32) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	c.table.update(partKey{topic, idx}, func(s *markSlot) { s.saved, s.hasSaved = savedMark{}, false })
	c.changed++
}

// retain drops the saved marks of the partitions keep refuses (not hosted
// here, or of an older topic of the same name).
func (c *hwmCheckpoint) retain(keep func(topic string, idx int32, id [16]byte) bool) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	var drop []partKey
	c.table.each(func(k partKey, s *markSlot) {
		if s.hasSaved && !keep(k.topic, k.index, s.saved.id) {
			drop = append(drop, k)
		}
	})
	for _, k := range drop {
		c.table.update(k, func(s *markSlot) { s.saved, s.hasSaved = savedMark{}, false })
		c.changed++
	}
}

// checkpointHWMs writes the checkpoint if a mark or the set of partitions
// changed since the last write: hwmCheckpointLoop's round, and Close's.
func (b *Broker) checkpointHWMs() error {
	c := b.hwms
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if !b.hwmsChanged() {
		return nil
	}
	return b.writeHWMsLocked()
}

// syncLoweredHWM makes a lowered mark of p durable before its log takes
// records above it (see the top of this file); a no-op unless one of
// p's marks went down since the last such write. Called with none of p's
// locks held.
func (p *Partition) syncLoweredHWM() error {
	b := p.lazy.owner
	if b == nil || !p.hwmLowered.Load() {
		return nil
	}
	if err := b.syncLoweredHWMs(); err != nil {
		return fmt.Errorf("checkpoint the lowered high watermark of %s-%d: %w", p.topic, p.index, err)
	}
	p.hwmLowered.Store(false)
	return nil
}

// syncLoweredHWMs returns once a write that read every mark after this
// call began is durable: one in flight when it is called may have read
// the marks before they went down, so it waits for that one and writes
// again, together with every other caller waiting meanwhile.
func (b *Broker) syncLoweredHWMs() error {
	c := b.hwms
	want := c.requested.Add(1)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.covered >= want {
		return nil
	}
	return b.writeHWMsLocked()
}

// hwmsChanged reports whether the file is behind: a partition's mark
// moved since the last write read it, or the set of partitions changed.
// Called with writeMu held.
func (b *Broker) hwmsChanged() bool {
	c := b.hwms
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	return c.changed != c.written || len(c.dirty) > 0
}

// writeHWMsLocked writes the checkpoint: the open logs' marks and the
// saved ones of the others. Then it removes the previous release's files
// of the logs it holds. Called with writeMu held.
func (b *Broker) writeHWMsLocked() error {
	c := b.hwms
	req := c.requested.Load() // before the marks are read: each request up to it is covered
	c.marksMu.Lock()
	dirty := c.dirty
	c.dirty, c.spare = c.spare[:0], nil
	defer func() {
		clear(dirty) // holds no partition
		c.spare = dirty[:0]
	}()
	for _, p := range dirty {
		p.hwmDirty.Store(false) // before its mark is read: a move from now on is the next write's
	}
	gen := c.changed
	cp := c.table.checkpointInto(&c.bufs)
	c.marksMu.Unlock()
	c.bufs.file = cp.AppendEncode(c.bufs.file[:0])
	if err := segments.WriteFileAtomic(c.fs, c.dir, hwmCheckpointFile, c.bufs.file); err != nil {
		for _, p := range dirty {
			p.hwmMoved() // still to write
		}
		return fmt.Errorf("write the high-watermark checkpoint: %w", err)
	}
	c.covered = req
	c.marksMu.Lock()
	c.written = gen
	var legacy []*Partition
	for _, p := range dirty {
		if s := c.table.get(partKey{p.topic, p.index}); p.hwmLegacy.Load() && s != nil && s.open == p {
			legacy = append(legacy, p) // its mark was written
		}
	}
	c.marksMu.Unlock()
	for _, p := range legacy {
		b.removeLegacyHWM(p)
	}
	return nil
}

// removeLegacyHWM removes the previous release's checkpoint of p, whose
// mark the directory checkpoint now holds.
func (b *Broker) removeLegacyHWM(p *Partition) {
	dir, err := b.partitionDir(p.topic, p.index)
	if err == nil {
		err = b.fs().Remove(filepath.Join(dir, legacyHWMFile))
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.logger.Warn("remove the previous release's high-watermark file", "topic", p.topic, "partition", p.index, "err", err)
		return
	}
	p.hwmLegacy.Store(false)
}

// hwmCheckpointLoop writes the checkpoint every interval when it changed.
func (b *Broker) hwmCheckpointLoop(ctx context.Context, every time.Duration) {
	defer close(b.hwmDone)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := b.checkpointHWMs(); err != nil {
				b.logger.Warn("checkpoint high watermarks", "err", err)
			}
		}
	}
}

// loadHWM sets the high watermark of p's log, just opened, from the
// checkpoint (or the previous release's file of the log): only what was
// known to be replicated before a restart is visible, at most the log end
// and at least its start; a leader moves the mark on as its in-sync
// replicas catch up. A saved mark above the log end (a power cut lost the
// tail) is lowered in the checkpoint before the log is used.
func (p *Partition) loadHWM(log *segments.Log) error {
	b := p.lazy.owner
	hw, known := int64(0), false
	if b != nil {
		hw, known = b.hwms.mark(p.topic, p.index, p.topicID)
	}
	if !known {
		if raw, err := log.ReadSideFile(legacyHWMFile); err == nil && raw != nil {
			p.hwmLegacy.Store(true)
			hw, known = parseLegacyHWM(raw)
		}
	}
	cur := max(min(hw, log.EndOffset()), log.StartOffset())
	// Nothing to write until it moves: a log with no entry opens at its
	// start, as with cur. But the previous release's file goes once the
	// directory checkpoint holds the mark (hwmCheckpoint.opened).
	p.hwm.Store(cur)
	if b != nil && known && hw > cur {
		undo := b.hwms.setMark(p.topic, p.index, savedMark{p.topicID, cur})
		if err := b.syncLoweredHWMs(); err != nil {
			undo()
			return fmt.Errorf("checkpoint the lowered high watermark of %s-%d: %w", p.topic, p.index, err)
		}
	}
	return nil
}

// parseLegacyHWM reads the previous release's per-partition checkpoint.
func parseLegacyHWM(raw []byte) (int64, bool) {
	off, sum, ok := strings.Cut(strings.TrimSpace(string(raw)), " ")
	o, err1 := strconv.ParseInt(off, 10, 64)
	s, err2 := strconv.ParseUint(sum, 10, 32)
	if !ok || err1 != nil || err2 != nil || o < 0 || uint32(s) != legacyHWMChecksum(o) {
		return 0, false
	}
	return o, true
}

// legacyCastagnoli is the CRC-32C table of the previous release's
// checkpoint line; batch CRCs are recordbatch's alone.
var legacyCastagnoli = crc32.MakeTable(crc32.Castagnoli)

func legacyHWMChecksum(off int64) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(off))
	return crc32.Checksum(b[:], legacyCastagnoli)
}

// lowerHWM sets p's mark below the one it had: syncLoweredHWM writes it
// before the log takes records above it. Called with appendMu held.
func (p *Partition) lowerHWM(hw int64) {
	p.hwm.Store(hw)
	p.hwmLowered.Store(true)
	p.hwmMoved()
}

// retainHostedHWMs drops the saved marks of partitions the applied image
// does not place here (deleted or moved away while this node was down),
// or places for another topic of the same name: the next checkpoint is
// written without them.
func (b *Broker) retainHostedHWMs() {
	b.mu.RLock()
	defer b.mu.RUnlock()
	b.hwms.retain(func(topic string, idx int32, id [16]byte) bool {
		if b.img == nil || !b.placedLocked(topic, idx) {
			return false
		}
		t, ok := b.img.Topics.Lookup(topic)
		return ok && t.ID == id
	})
}
