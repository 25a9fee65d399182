package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// Leader-side replication state of a partition: which replicas exist, which
// are in sync, how far each follower's log reaches, and the high watermark
// that follows from them. Followers pull (fetcher.go); every fetch tells the
// leader the follower's log end offset.

var ErrNotEnoughReplicas = errors.New("not enough in-sync replicas")

type followerState struct {
	leo        int64     // the follower's log end offset, -1 unknown
	caughtUpAt time.Time // last time it was known to hold the leader's log end
	// The follower's previous fetch: when, and the leader's log end then
	// (-1: none yet). A fetch that reaches that end shows the follower
	// was caught up at that previous fetch (Kafka's lastCaughtUpTime).
	lastFetchAt  time.Time
	lastFetchEnd int64
}

// newFollowerState is a follower of unknown position with a fresh lag
// budget from now (a new leader, a replica added).
func newFollowerState(now time.Time) followerState {
	return followerState{leo: -1, caughtUpAt: now, lastFetchEnd: -1}
}

// followerTable is a leader's followers: a handful (the replication factor
// less one), so a slice of values searched in order. A map of pointers was
// two or three objects a led partition for the collector to trace, and a
// hash lookup in every ISR check and follower fetch (issue 19: 300,000
// partitions a node). nil means not leader; a leader without followers
// (replication factor 1) has an empty, non-nil table. Guarded by the
// partition's repl.mu; a pointer from get is good until the table changes.
type followerTable []followerEntry

type followerEntry struct {
	id int32
	followerState
}

// newFollowerTable is a new leader's table: every replica but self, each
// with a fresh lag budget.
func newFollowerTable(replicas []int32, self int32, now time.Time) followerTable {
	t := make(followerTable, 0, max(len(replicas)-1, 0))
	for _, r := range replicas {
		if r != self && t.get(r) == nil {
			t = append(t, followerEntry{id: r, followerState: newFollowerState(now)})
		}
	}
	return t
}

// get is follower id's state, nil when id is no follower.
func (t followerTable) get(id int32) *followerState {
	for i := range t {
		if t[i].id == id {
			return &t[i].followerState
		}
	}
	return nil
}

// replicaSet is a partition's placement and, on its leader, its followers.
type replicaSet struct {
	mu             sync.Mutex
	self           int32
	replicas       []int32       // guarded by mu
	isr            []int32       // guarded by mu
	partitionEpoch int32         // guarded by mu
	followers      followerTable // guarded by mu; leader only
	// end is the leader's log end as of its last append (guarded by mu;
	// leader only, -1 unknown: the log is not open): creditIdleLocked
	// needs the end an append moved from.
	end int64
}

// setMeta applies the partition's metadata. It returns whether this broker
// became leader or follower with this change.
func (p *Partition) setMeta(pm raftfsm.Partition, self int32) (roleChanged bool) {
	p.repl.mu.Lock()
	// A topic's every partition is set again when one of them changes:
	// only a changed one is due for an ISR check.
	placed := p.repl.self != self || p.repl.partitionEpoch != pm.PartitionEpoch ||
		!slices.Equal(p.repl.replicas, pm.Replicas) || !slices.Equal(p.repl.isr, pm.ISR)
	p.repl.self = self
	p.repl.replicas = slices.Clone(pm.Replicas)
	p.repl.isr = slices.Clone(pm.ISR)
	p.repl.partitionEpoch = pm.PartitionEpoch
	old := p.leader.Swap(pm.Leader)
	oldEpoch := p.leaderEpoch.Swap(pm.LeaderEpoch)
	p.term.Store(packTerm(pm.Leader, pm.LeaderEpoch))
	roleChanged = old != pm.Leader || oldEpoch != pm.LeaderEpoch
	if pm.Leader == self && (roleChanged || p.repl.followers == nil) {
		// A new leader gives every follower a fresh lag budget.
		p.repl.followers = newFollowerTable(pm.Replicas, self, p.wallNow())
		p.repl.end = -1 // an unopened log's end is recorded when it opens (leaderAppended)
		if log := p.log(); log != nil {
			p.repl.end = log.EndOffset()
		}
	} else if pm.Leader != self {
		p.repl.followers = nil
	} else {
		p.syncFollowersLocked(pm.Replicas) // a reassignment adds or drops replicas
	}
	if placed || roleChanged || pm.Leader == self && p.repl.followers == nil {
		p.markISRCheckLocked()
	}
	advanced := p.advanceHWMLocked()
	p.repl.mu.Unlock()
	if roleChanged || advanced {
		p.wake()
	}
	return roleChanged
}

// advanceHWMLocked moves the high watermark of a leader to the smallest log
// end offset in the ISR. It never moves backwards.
func (p *Partition) advanceHWMLocked() bool {
	log := p.log()
	if p.leader.Load() != p.repl.self || log == nil {
		return false // an unopened log's mark is set when it opens
	}
	hw := log.EndOffset()
	for _, r := range p.repl.isr {
		if r == p.repl.self {
			continue
		}
		f := p.repl.followers.get(r)
		if f == nil || f.leo < 0 {
			return false
		}
		hw = min(hw, f.leo)
	}
	for {
		cur := p.hwm.Load()
		if hw <= cur {
			return false
		}
		if p.hwm.CompareAndSwap(cur, hw) {
			p.hwmMoved()
			return true
		}
	}
}

// leaderAppended is called after an append on the leader (and when its
// log opens).
func (p *Partition) leaderAppended() {
	now := p.wallNow()
	p.repl.mu.Lock()
	p.creditIdleLocked(now)
	p.advanceHWMLocked()
	p.repl.mu.Unlock()
	p.wake() // followers wait for the log end, consumers for the high watermark
}

// creditIdleLocked counts the followers that held the log end the append
// moved from as caught up until now. A follower's session holds an idle
// partition without fetching it (kapi.Watchers.CaughtUpAt), so nothing
// refreshed its caughtUpAt while the partition was idle: after the first
// append in longer than the lag budget, every follower looked lagging
// until its fetch reached the new end, and the ISR shrank and grew again
// (hundreds of times in one topic's first writes, issue 19). Kafka's
// leader counts a follower whose fetch reached the log end as it was at
// that fetch as caught up at that fetch; a session fetch at the old end
// before this append is that. Called with p.repl.mu held.
func (p *Partition) creditIdleLocked(now time.Time) {
	log := p.log()
	if log == nil || p.leader.Load() != p.repl.self || p.repl.followers == nil {
		return
	}
	prev, end := p.repl.end, log.EndOffset()
	p.repl.end = end
	if prev < 0 || end == prev {
		return
	}
	for i := range p.repl.followers {
		f := &p.repl.followers[i]
		// A session tick after this append, still at the old end, was
		// behind; the follower held the old end until now.
		at := p.watchers.CaughtUpAt(f.id, prev)
		if at.After(now) {
			at = now
		}
		if at.After(f.caughtUpAt) {
			f.caughtUpAt = at
		}
	}
}

// FollowerFetched records that follower id fetched from offset, i.e. its log
// holds everything below it. Like Kafka's leader it takes the position only
// from a replica of the partition (NOT_LEADER_OR_FOLLOWER, or
// UNKNOWN_LEADER_EPOCH when the fetch names an epoch: the placement may be
// newer than this leader's metadata) and only within its own log
// (OFFSET_OUT_OF_RANGE): a follower cannot hold what the leader has not
// written, so a larger offset would only ever be a lie that moves the
// high watermark over unreplicated records.
func (p *Partition) FollowerFetched(id int32, offset int64, leaderEpoch int32) error {
	p.repl.mu.Lock()
	f := p.repl.followers.get(id)
	if f == nil {
		p.repl.mu.Unlock()
		if leaderEpoch >= 0 {
			return fmt.Errorf("%w: broker %d is no follower of %s-%d", kafkaproto.ErrUnknownLeaderEpoch, id, p.topic, p.index)
		}
		return fmt.Errorf("%w: broker %d is no follower of %s-%d", ErrNotLeader, id, p.topic, p.index)
	}
	end := p.leaderEnd() // an unopened empty log's base (lazyreplica.go)
	if offset > end || offset < 0 {
		p.repl.mu.Unlock()
		return fmt.Errorf("%w: follower %d fetches %s-%d at %d, log end %d", ErrOffsetOutOfRange, id, p.topic, p.index, offset, end)
	}
	now := p.wallNow()
	f.leo = offset
	switch {
	case offset >= end:
		f.caughtUpAt = now
	case f.lastFetchEnd >= 0 && offset >= f.lastFetchEnd && f.lastFetchAt.After(f.caughtUpAt):
		// Not at the end now, but at the end as of its previous fetch:
		// caught up then. Without this, a follower keeping up with a
		// steady stream of appends, whose fetches rarely land exactly
		// on the end, left the ISR every lag budget.
		f.caughtUpAt = f.lastFetchAt
	}
	f.lastFetchAt, f.lastFetchEnd = now, end
	advanced := p.advanceHWMLocked()
	if f.leo >= p.hwm.Load() && !slices.Contains(p.repl.isr, id) {
		p.markISRCheckLocked() // it may join
	}
	p.repl.mu.Unlock()
	if advanced {
		p.wake()
	}
	return nil
}

// currentISR is the in-sync replicas per the metadata, sorted.
func (p *Partition) currentISR() []int32 {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	isr := slices.Clone(p.repl.isr)
	slices.Sort(isr)
	return isr
}

// isrSize is the number of in-sync replicas per the metadata.
func (p *Partition) isrSize() int {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	return len(p.repl.isr)
}

// wantedISR computes the ISR the leader should propose: followers that have
// lagged longer than lagMax leave; followers caught up to the high watermark
// join. ok is false when nothing changes.
func (p *Partition) wantedISR(now time.Time, lagMax time.Duration) (isr []int32, epoch int32, ok bool) {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	if p.leader.Load() != p.repl.self || p.repl.followers == nil {
		return nil, 0, false
	}
	hw := p.hwm.Load()
	isr = []int32{p.repl.self}
	for _, r := range p.repl.replicas {
		if f := p.repl.followers.get(r); f != nil {
			if in, _ := p.followerInISRLocked(r, f, hw, now, lagMax); in {
				isr = append(isr, r)
			}
		}
	}
	slices.Sort(isr)
	cur := slices.Clone(p.repl.isr)
	slices.Sort(cur)
	return isr, p.repl.partitionEpoch, !slices.Equal(isr, cur)
}

// isrChangeWanted reports whether wantedISR would find a change at now,
// without allocating, and records in isrDue when the ISR loop needs to ask
// again (isrCheckDue), queueing the partition for that round (Broker.isrDue,
// or Broker.isrAsk for the next one). The loop asked every led partition every round,
// and nearly all answered no: at 300,000 open logs a fifth of a node's CPU
// after a kill -9 (issue 19). Without a change, the answer stays no until
// the first of: an ISR member's lag budget runs out (the last time it was
// known caught up, plus lagMax: an idle partition's follower sessions move
// that on without touching the partition, so it is asked again then, once
// a lag budget), an event that can bring a change sooner (markISRCheck:
// new metadata, a fetch that brings a follower outside the ISR to the
// high watermark, a recovery that lowers it), or lagMax from now, for
// whatever none of these announces.
func (p *Partition) isrChangeWanted(now time.Time, lagMax time.Duration) bool {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	if p.leader.Load() != p.repl.self || p.repl.followers == nil {
		p.isrDue.Store(math.MaxInt64) // until setMeta makes it leader here
		if b := p.lazy.owner; b != nil {
			b.isrDue.unset(p)
		}
		return false
	}
	hw := p.hwm.Load()
	due := now.Add(lagMax)
	same, wanted := slices.Contains(p.repl.isr, p.repl.self), 1
	for _, r := range p.repl.replicas {
		f := p.repl.followers.get(r)
		if f == nil {
			continue
		}
		in, lagsAt := p.followerInISRLocked(r, f, hw, now, lagMax)
		if in {
			wanted++
		}
		member := slices.Contains(p.repl.isr, r)
		if in != member {
			same = false
		}
		if member && lagsAt.Before(due) {
			due = lagsAt
		}
		if !member && !in && f.leo >= hw && f.leo >= 0 && p.watchers.Holds(r) {
			// Lagging at the mark: a fetch of its session holding this
			// idle partition at the end brings it back without touching
			// the partition, so it is asked more often. Only while a
			// session holds it: without one only a fetch of the
			// partition brings the follower back, and that fetch asks
			// (FollowerFetched). A dead follower's partitions were
			// asked every sessionRejoinCheck until their first write
			// (issue 19: 100,000s of them after a kill -9).
			if at := now.Add(sessionRejoinCheck(lagMax)); at.Before(due) {
				due = at
			}
		}
	}
	if !same || wanted != len(p.repl.isr) {
		p.markISRCheckLocked() // until the change is made: asked each round
		if b := p.lazy.owner; b != nil {
			b.isrDue.unset(p) // asked next round as the set's, not twice
		}
		return true
	}
	// After now: a round takes the partitions due at its time, so it
	// must not find this one due again.
	at := max(due.UnixNano(), now.UnixNano()+1)
	p.isrDue.Store(at)
	if b := p.lazy.owner; b != nil {
		b.isrDue.set(p, at)
	}
	return false
}

// sessionRejoinCheck is how often a partition is asked whether a follower
// outside its ISR, at the high watermark but lagging, is caught up again
// by its session's fetches alone (an idle partition its session holds at
// the end): a follower back from a pause longer than the lag budget
// rejoins within it. Every round was a walk of every partition a dead
// follower had been at the mark of (issue 19).
func sessionRejoinCheck(lagMax time.Duration) time.Duration { return lagMax / 4 }

// isrCheckDue reports whether the ISR loop must ask p at now whether its
// ISR should change (isrChangeWanted). The round does not ask it: it
// takes the partitions queued for then (Broker.isrDue, isrAsk), which
// TestISRRoundAsksEveryDuePartition ties to it.
func (p *Partition) isrCheckDue(now time.Time) bool {
	return now.UnixNano() >= p.isrDue.Load()
}

// markISRCheckLocked makes p's ISR due for a check at the ISR loop's next
// round. Called with p.repl.mu held (isrChangeWanted stores under it too,
// so a check that began before this event cannot put it off).
func (p *Partition) markISRCheckLocked() {
	p.isrDue.Store(0)
	p.askISR()
}

// askISR puts p among the partitions the next ISR round asks (isrRound).
// Cheap once it is: an atomic load.
func (p *Partition) askISR() {
	b := p.lazy.owner
	if b == nil || p.isrAsked.Load() {
		return
	}
	b.isrAsk.mu.Lock()
	if !p.isrAsked.Load() {
		b.isrAsk.addLocked(p)
		p.isrAsked.Store(true)
	}
	b.isrAsk.mu.Unlock()
}

// followerInISRLocked reports whether follower r, in state f, belongs in
// the ISR at now: an ISR member that has not lagged longer than lagMax
// stays, a follower caught up to the high watermark joins. lagsAt is when
// its lag budget runs out as far as is known at now (the last time it was
// known to hold the leader's log end, plus lagMax): not before then does
// it lag. Called with repl.mu held.
func (p *Partition) followerInISRLocked(r int32, f *followerState, hw int64, now time.Time, lagMax time.Duration) (in bool, lagsAt time.Time) {
	lagsAt = f.caughtUpAt.Add(lagMax)
	if now.After(lagsAt) {
		// An idle partition is not read by the follower session's
		// fetches, only held: each still says where the follower is.
		if at := p.watchers.CaughtUpAt(r, p.leaderEnd()).Add(lagMax); at.After(lagsAt) {
			lagsAt = at
		}
	}
	if now.After(lagsAt) {
		return false, lagsAt
	}
	return slices.Contains(p.repl.isr, r) || f.leo >= hw && f.leo >= 0, lagsAt
}

// leaseCheckInterval is how often a write waiting for its replicas looks
// at the broker's lease.
const leaseCheckInterval = 100 * time.Millisecond

// WaitReplicated waits until the high watermark passes offset (acks=all),
// appended at leader epoch epoch.
// A leader whose lease ends meanwhile (mayWrite) answers NOT_LEADER then:
// cut off from the controllers, it is about to be replaced, and its
// producers are better off finding the next leader than waiting out the
// request's timeout here.
func (p *Partition) WaitReplicated(ctx context.Context, offset int64, epoch int32) error {
	if p.hwm.Load() > offset {
		// Done already (RF 1, or the followers were quick): no channel,
		// no ticker. A request of 100,000 partitions finds many so.
		return nil
	}
	var leaseCheck <-chan time.Time // the lease ends without a wake-up: look again now and then
	if p.leaseValid != nil {
		tick := time.NewTicker(leaseCheckInterval)
		defer tick.Stop()
		leaseCheck = tick.C
	}
	for {
		ch := p.Changed()
		if p.hwm.Load() > offset {
			return nil
		}
		if p.leader.Load() != p.repl.self || p.leaderEpoch.Load() != epoch {
			return fmt.Errorf("%w: leadership of %s-%d moved before the write was replicated", ErrNotLeader, p.topic, p.index)
		}
		if p.leaseValid != nil && !p.leaseValid(time.Now()) {
			return fmt.Errorf("%w: %s-%d: this broker's heartbeats went unanswered for a session timeout before the write was replicated", ErrNotLeader, p.topic, p.index)
		}
		select {
		case <-ch:
		case <-leaseCheck:
		case <-ctx.Done():
			return fmt.Errorf("wait for the in-sync replicas of %s-%d: %w", p.topic, p.index, ctx.Err())
		}
	}
}

// appendAsFollower copies whole batches fetched from the leader, keeping
// their offsets and leader epochs. fetchEpoch is the partition's leader
// epoch when the fetch was sent: an answer to a fetch sent under an older
// epoch comes from a previous leader (paused with the request in flight,
// it answered when it woke up), after this log was truncated against the
// new leader; appended, it sat past that point, the new leader's batches
// then started below this log's end and every fetch after failed. It is
// dropped (Kafka's fetcher drops such answers too).
func (p *Partition) appendAsFollower(data []byte, fetchEpoch int32) error {
	whole := 0
	first := int32(-1)     // the leader epoch of the first batch
	var one [1]copiedBatch // a partition's news in a round is mostly one batch: no allocation for it
	copied := one[:0]
	if err := WalkBatches(data, func(raw []byte, info recordbatch.Info) error {
		if whole == 0 {
			first = batchLeaderEpoch(raw)
		}
		whole += len(raw)
		copied = append(copied, copiedBatch{raw, info})
		return nil
	}); err != nil {
		return fmt.Errorf("replicate %s-%d: %w", p.topic, p.index, err)
	}
	if whole == 0 {
		return nil
	}
	if err := p.disk.Admit(whole); err != nil {
		return err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.leader.Load() == p.repl.self || p.leaderEpoch.Load() != fetchEpoch {
		return nil // leadership moved since the fetch: a newer leader is the truth now
	}
	// The leader's batches continue this log only if their epochs do: an
	// epoch below the last one here means this log holds a tail the
	// leader never had, so it must be truncated again first.
	if last := p.log().LeaderEpoch(); first >= 0 && first < last {
		return fmt.Errorf("%w: %s-%d fetched epoch %d after local epoch %d", errDiverged, p.topic, p.index, first, last)
	}
	wasEmpty := p.log().StartOffset() == p.log().EndOffset()
	_, err := p.log().AppendReplicated(data[:whole])
	p.touchLog()
	if err != nil {
		p.forgetProducersLocked() // part of it may be in the log
		return fmt.Errorf("replicate %s-%d (fetched epoch %d, local epoch %d): %w", p.topic, p.index, first, p.log().LeaderEpoch(), err)
	}
	p.followProducersLocked(copied, wasEmpty, p.wallNow())
	p.wake()
	return nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as the leader: the largest
// epoch at or below epoch in the log and where it ends. A log records an
// epoch at its first append, while Kafka's leader records its epoch when it
// is elected; so for an epoch newer than the log's last one but not newer
// than this leader's (the asker led or followed a leader that wrote nothing
// this log has), the answer is the log's last epoch, ending at the log end,
// where Kafka's leader would answer it ending where its own epoch starts.
// The log alone answers "no such epoch" (-1), which left a follower's
// divergent tail in place and sent consumers back to the log start.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	p.appendMu.Lock() // the log end and its last epoch from the same moment
	defer p.appendMu.Unlock()
	e, end, err := p.log().EndOffsetForEpoch(epoch)
	if err != nil || e >= 0 || epoch > p.leaderEpoch.Load() {
		return e, end, err
	}
	if last := p.log().LeaderEpoch(); last >= 0 && last < epoch {
		return last, p.log().EndOffset(), nil
	}
	return e, end, nil
}

// errDiverged: a follower's log ends with a leader epoch newer than what
// the leader sends next; it truncates again before fetching on.
var errDiverged = errors.New("follower log diverged from the leader's")

// batchLeaderEpoch reads a RecordBatch's partition leader epoch (bytes
// 12-15: after the base offset and the batch length).
func batchLeaderEpoch(raw []byte) int32 { return int32(binary.BigEndian.Uint32(raw[12:16])) }

// followerLearned applies the leader's high watermark and log start.
func (p *Partition) followerLearned(hw, logStart int64) {
	hw = min(hw, p.log().EndOffset())
	advanced := false
	for cur := p.hwm.Load(); hw > cur; cur = p.hwm.Load() {
		if p.hwm.CompareAndSwap(cur, hw) {
			p.hwmMoved()
			advanced = true
			break
		}
	}
	if logStart > p.log().StartOffset() {
		p.log().DeleteRecordsBefore(min(logStart, p.log().EndOffset()))
		p.touchLog()
	}
	if advanced {
		p.wake()
	}
}

// truncateAsFollower cuts the log at end, where it diverged from the leader
// as the leader answered at leader epoch askEpoch (ignored when leadership
// moved since: a previous leader's answer may cut below what the new one
// holds, even below the high watermark).
func (p *Partition) truncateAsFollower(end int64, askEpoch int32) error {
	if err := p.truncateAsFollowerLocked(end, askEpoch); err != nil {
		return err
	}
	return p.syncLoweredHWM() // before the records the leader sends in place of the cut ones
}

func (p *Partition) truncateAsFollowerLocked(end int64, askEpoch int32) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if end < 0 || end >= p.log().EndOffset() || p.leader.Load() == p.repl.self || p.leaderEpoch.Load() != askEpoch {
		return nil
	}
	err := p.log().Truncate(end)
	p.touchLog()
	if err != nil {
		return fmt.Errorf("truncate %s-%d to %d: %w", p.topic, p.index, end, err)
	}
	p.forgetProducersLocked()
	if p.hwm.Load() > end {
		p.lowerHWM(end)
	}
	return nil
}

// resetAsFollower restarts an empty log at the leader's log start offset,
// as the leader answered a fetch sent at leader epoch fetchEpoch (ignored
// when leadership moved since).
func (p *Partition) resetAsFollower(offset int64, fetchEpoch int32) error {
	if err := p.resetAsFollowerLocked(offset, fetchEpoch); err != nil {
		return err
	}
	return p.syncLoweredHWM()
}

func (p *Partition) resetAsFollowerLocked(offset int64, fetchEpoch int32) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.leader.Load() == p.repl.self || p.leaderEpoch.Load() != fetchEpoch {
		return nil
	}
	err := p.log().Reset(offset)
	p.touchLog()
	if err != nil {
		return fmt.Errorf("reset %s-%d to %d: %w", p.topic, p.index, offset, err)
	}
	p.forgetProducersLocked()
	if p.hwm.Load() > offset {
		p.lowerHWM(offset)
	} else {
		p.hwm.Store(offset)
		p.hwmMoved()
	}
	return nil
}
