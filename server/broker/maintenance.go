package broker

import (
	"context"
	"time"
)

// Log maintenance in time proportional to what changed and what time
// made due (issue 19). With every hosted log open (300,000 on a node
// after the first write to each), a round that ran every open log's
// Maintain spent most of its time on logs nobody had touched for minutes;
// keeping the logs changed in the last minute and a twelfth of the others
// each round still looked at every log of a node written lately, a cache
// miss or more each, 6% of a survivor's CPU after a kill -9.
//
// A round maintains the logs changed since their last maintenance (an
// append, a copy from the leader, a truncation, a reset, a DeleteRecords,
// a config, its opening, a recovery: touchLog puts the log in
// Broker.changed), and the logs whose next due time came (Broker.maintDue,
// a dueQueue). After each log's maintenance its next due time is the
// log's own answer (segments.Log.NextMaintain: a segment.ms roll, a
// flush.ms fsync, the recovery point's checkpoint), which only a change
// makes earlier; a log that is still due right after its pass (compaction,
// retention by time of its sealed segments, a roll's flush in flight)
// comes back after idleMaintainWait, as an idle log's turn came before,
// and no log waits longer than maxMaintainWait whatever it answered. So
// retention.bytes, segment.ms and flush.ms act on a log within a round of
// their cause, as they did, and an idle log with nothing pending costs
// nothing.
//
// A log that fails lists itself among the failed ones for the storage
// loop (segments.Options.OnFail, storage.go): maintenance skips it until
// it recovered.
const (
	idleMaintainWait = time.Minute
	maxMaintainWait  = time.Hour
)

// maintainBatch is how many due logs a round takes out of the queue at a
// time.
const maintainBatch = 256

// touchLog marks p's log changed: maintained next round. Cheap once it
// is: an atomic load.
func (p *Partition) touchLog() {
	b := p.lazy.owner
	if b == nil || p.maintChanged.Load() {
		return
	}
	b.changed.mu.Lock()
	if !p.maintChanged.Load() {
		b.changed.addLocked(p)
		p.maintChanged.Store(true)
	}
	b.changed.mu.Unlock()
}

// maintain runs one maintenance round: the retention sweep of unopened
// logs, the logs changed since their last round, and those whose due
// time came. It returns between two logs once ctx is done: Close waits
// for the round (whose high-watermark checkpoints, three fsyncs a log
// after a write to each before they moved to hwmCheckpointLoop, took 17 s
// of a node's exit at 10,000 written logs), and closes the logs itself.
// visited is how many logs it maintained.
func (b *Broker) maintain(ctx context.Context, now time.Time) (visited int) {
	b.sweepUnopened(now)
	// Last: the files the round itself used are not idle.
	defer b.closeIdleFiles()
	// A change from now on is seen next round.
	changed := b.changed.take(func(p *Partition) { p.maintChanged.Store(false) })
	for i, p := range changed {
		if ctx.Err() != nil {
			for _, p := range changed[i:] { // left for the next round (Close)
				p.touchLog()
			}
			return visited
		}
		if b.open.has(p) { // not deleted, nor closed
			visited++
			b.maintained(p)
			b.maintainLog(p, now)
			b.maintainNext(p, now)
		}
	}
	var buf [maintainBatch]*Partition
	for ctx.Err() == nil {
		due := b.maintDue.popDue(now.UnixNano(), buf[:])
		if len(due) == 0 {
			break
		}
		for i, p := range due {
			if ctx.Err() != nil {
				for _, p := range due[i:] { // left for the next round (Close)
					b.maintDue.set(p, now.UnixNano())
				}
				break
			}
			visited++
			b.maintained(p)
			b.maintainLog(p, now)
			b.maintainNext(p, now)
		}
		clear(buf[:])
	}
	return visited
}

// maintained is called with each log a round maintains, when a test
// set it.
func (b *Broker) maintained(p *Partition) {
	if b.onMaintained != nil {
		b.onMaintained(p)
	}
}

// maintainNext queues p's log at its next due time after a maintenance
// at now (see the top of this file): always after now, so a round ends.
func (b *Broker) maintainNext(p *Partition, now time.Time) {
	next := p.log().NextMaintain()
	if !next.After(now) {
		next = now.Add(idleMaintainWait)
	}
	if last := now.Add(maxMaintainWait); next.After(last) {
		next = last
	}
	b.maintDue.set(p, next.UnixNano())
}

// maintainLog runs p's log maintenance (retention, rolls, flush.ms,
// compaction, its recovery point's checkpoint).
func (b *Broker) maintainLog(p *Partition, now time.Time) {
	log := p.log()
	if log.Err() != nil {
		return // its disk failed: storageLoop reports and recovers it (OnFail listed it)
	}
	start := log.StartOffset()
	if err := log.Maintain(now); err != nil {
		b.logger.Warn("log maintenance", "topic", p.topic, "partition", p.index, "err", err)
	}
	if log.StartOffset() != start || log.Err() != nil {
		// Retention moved the log start: fetch sessions send it. Or the
		// log failed: a follower's fetcher stops fetching it.
		p.wake()
	}
}
