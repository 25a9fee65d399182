package broker

import (
	"context"
	"math"
	"time"
)

// Log maintenance and the storage loop's look for failed logs, in time
// proportional to what changed (issue 19). With every hosted log open
// (300,000 on a node after the first write to each), a round that ran
// every open log's Maintain and asked every log for its error spent most
// of its time on logs nobody had touched for minutes.
//
// A log is active from a change (an append, a copy from the leader, a
// truncation, a reset, a DeleteRecords, a config, its opening, a
// recovery: touchLog) until quietRounds maintenance rounds passed without
// one: each round maintains the active logs, as every log before, so
// retention.bytes, segment.ms, retention.ms and flush.ms act on a log in
// use within a round as they did. A log whose flush.ms is set stays active
// (its fsyncs are due at that age of its oldest unflushed record). The
// other open logs are maintained in turn, 1/idleMaintainRounds of them a
// round: each at least once every idleMaintainRounds rounds (a minute at
// the 5 s rounds), for what time alone brings to an idle log (segment.ms,
// retention.ms of its sealed segments, the checkpoint of its recovery
// point, compaction) — Kafka looks at retention every 5 minutes.
//
// A log that fails lists itself among the failed ones for the storage
// loop (segments.Options.OnFail, storage.go): maintenance skips it until
// it recovered.
const (
	quietRounds        = 12
	idleMaintainRounds = 12
)

// touchLog marks p's log active: changed, so maintained each round until
// it has been quiet for quietRounds. Cheap once it is: an atomic store
// and load.
func (p *Partition) touchLog() {
	b := p.lazy.owner
	if b == nil {
		return
	}
	p.touchedRound.Store(b.maintRound.Load())
	if !p.maintainActive.Load() {
		b.active.mu.Lock()
		b.active.addLocked(p)
		p.maintainActive.Store(true)
		b.active.mu.Unlock()
	}
}

// quiet reports whether p has not been changed for quietRounds rounds
// before round, and has no flush.ms to keep.
func (p *Partition) quiet(round int64) bool {
	if cfg := p.lazy.cfg.Load(); cfg != nil && cfg.FlushMs > 0 && cfg.FlushMs < math.MaxInt64 {
		return false
	}
	return round-p.touchedRound.Load() >= quietRounds
}

// maintain runs one maintenance round: the retention sweep of unopened
// logs, the active logs, and the next share of the others. It returns
// between two logs once ctx is done: Close waits for the round (whose
// high-watermark checkpoints, three fsyncs a log after a write to each
// before they moved to hwmCheckpointLoop, took 17 s of a node's exit at
// 10,000 written logs), and closes the logs itself.
func (b *Broker) maintain(ctx context.Context, now time.Time) {
	b.sweepUnopened(now)
	// Last: the files the round itself used are not idle.
	defer b.closeIdleFiles()
	round := b.maintRound.Add(1)
	b.active.each(func(p *Partition) bool {
		if ctx.Err() != nil {
			return false
		}
		if !b.open.has(p) { // deleted, or closed
			b.deactivate(p, round, true)
			return true
		}
		b.maintainLog(p, now)
		if p.quiet(round) {
			b.deactivate(p, round, false)
		}
		return true
	})
	share := (b.open.len() + idleMaintainRounds - 1) / idleMaintainRounds
	b.rotation = b.open.eachFrom(b.rotation, share, func(p *Partition) bool {
		if ctx.Err() != nil {
			return false
		}
		if !p.maintainActive.Load() { // maintained above
			b.maintainLog(p, now)
		}
		return true
	})
}

// deactivate takes p out of the active logs unless it was changed since
// round began (a touch meanwhile saw it active and did not add it).
func (b *Broker) deactivate(p *Partition, round int64, always bool) {
	b.active.mu.Lock()
	defer b.active.mu.Unlock()
	b.active.removeLocked(p)
	p.maintainActive.Store(false)
	if !always && p.touchedRound.Load() >= round {
		b.active.addLocked(p)
		p.maintainActive.Store(true)
	}
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
