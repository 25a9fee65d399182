package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/broker/replfetch"
)

// A follower's fetch session with one leader (KIP-227 incremental fetch,
// the follower's side; the leader's is kafkaproto's fetchsession.go). The
// first request (session epoch 0) lists the partitions and opens a session
// on the leader; later ones list only the partitions whose fetch position
// changed (records appended, a new leader epoch, a moved log start) and
// forget those no longer fetched, and the answer carries only partitions
// with news. An idle follower's fetch then lists no partition and its
// answer none: the bytes on the wire, and the decoding on both ends, no
// longer grow with the number of idle partitions (issue 19: a broker
// following 10,000 partitions from each leader sent and decoded them all
// twice a second). Nor does building it: a request is built from the
// round's work, the partitions that changed (fetcher.go).
//
// A request lists at most replfetch.MaxRequestBytes of partitions (the
// leader bounds requests but Produce to 1 MiB), and forgets partitions held
// at an old position only while it stays under that 1 MiB (ForgetIfRoom):
// a session holding more is filled over several requests. A partition no
// longer fetched is always forgotten (not bounded: the leader's session
// would hold it for ever). A leader that keeps no session for us (it answers session id
// 0) is fetched from with full requests listing every partition, as before.
// The session (replfetch.Session, the run goroutine's own) lives in the
// connection; it is reset with it, and after the leader lost it
// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH).
//
// A request long-polls (replicaFetchWait) only when it reports every new
// position the follower has. Only the positions a request lists move the
// leader's high watermark, and so answer its acks=all produces; a request
// that left positions for the next one (more than fit, a catch-up after a
// failover) asks for no wait, and one sent while answers are still being
// applied (their partitions forgotten until done, fetchapply.go) waits at
// most replicaBusyFetchWait. Each waited out the whole long poll: with
// the new leaders' appends over, nothing new arrived to end it, and the
// 100,000 positions of a catch-up reached the leader one request of
// ~20,000 each 500 ms or so (issue 19).
//
// maxEpochAsks bounds the partitions of one OffsetForLeaderEpoch request
// (12 bytes each and their topics').
const (
	replicaBusyFetchWait = replicaApplyWait
	maxEpochAsks         = 8000
)

// readyToFetch reports whether p is fetched this round. A log that refuses
// writes (or a disk below --min-free-disk) fetches nothing: the leader then
// sees this replica fall behind and drops it from the ISR, instead of
// counting a replica in sync that cannot store what it is sent.
// A partition being applied or opened (fetchapply.go) waits for that.
func readyToFetch(p *Partition, st *followState) bool {
	if p.applying.Load() || !st.truncated || p.disk.IsLow() {
		return false
	}
	if log := p.log(); log != nil {
		return log.Err() == nil
	}
	_, empty := unopenedEmpty(p)
	return empty
}

// unopenedEmpty reports whether p's log is unopened and holds no record,
// and where it starts and ends then. A follower leaves such a log unopened
// (issue 19: every follower opened every log it followed, so lazy logs
// saved nothing in a replicated cluster) and fetches it from its base
// until the leader sends records.
func unopenedEmpty(p *Partition) (base int64, ok bool) {
	if p.log() != nil || p.lazy.owner == nil {
		return 0, false
	}
	lp, err := p.peekLog()
	if err != nil || !lp.empty() {
		return 0, false
	}
	return max(lp.base, 0), true
}

// fetchPosition is where p's log ends and starts, for a ready partition.
func fetchPosition(p *Partition) (end, start int64) {
	if log := p.log(); log != nil {
		return log.EndOffset(), log.StartOffset()
	}
	base, _ := unopenedEmpty(p)
	return base, base
}

// fetch sends one Fetch for the partitions ready to replicate (those whose
// position changed, in a session) and appends what comes back.
func (f *leaderFetcher) fetch(conn *kafkaconn.Conn) error {
	stats := &f.m.stats
	t0 := time.Now()
	req, ready := f.fetchRequest()
	if ready == 0 {
		f.sleep(replicaRetryBackoff)
		return nil
	}
	t1 := time.Now()
	stats.buildNanos.Add(int64(t1.Sub(t0)))
	stats.requests.Add(1)
	a := f.nextAnswer()
	err := conn.Fetch(replicaFetchWait+30*time.Second, req, &a.FetchAnswer)
	stats.answerNanos.Add(int64(time.Since(t1)))
	if err != nil {
		return err
	}
	if err := f.session.Answered(req, &a.Resp); errors.Is(err, replfetch.ErrSessionLost) {
		f.m.logger.Debug("replica fetch session lost", "leader", f.leader, "err", err)
		return nil // the next request opens a new one
	} else if err != nil {
		return fmt.Errorf("fetch from leader %d: %w", f.leader, err)
	}
	t2 := time.Now()
	backoff := f.applyAnswer(a)
	stats.applyNanos.Add(int64(time.Since(t2)))
	if backoff {
		f.sleep(replicaRetryBackoff)
	}
	return nil
}

// fetchRequest builds the next request of the session from the round's
// work: a full one (epoch 0 or without a session; work then holds every
// partition) lists every ready partition, an incremental one those whose
// position changed and forgets those no longer ready. It takes the
// partitions it settled out of work (fetcher.go). ready counts the
// partitions being replicated: those the session holds.
func (f *leaderFetcher) fetchRequest() (req *kmsg.FetchRequest, ready int) {
	r := f.session.NewRequest(f.m.self, replicaFetchWait, replicaFetchMaxBytes)
	busy, more := false, false
	for p, st := range f.work {
		if st == nil || !readyToFetch(p, st) {
			r.Forget(p)
			if st == nil || p.applying.Load() || p.disk.IsLow() {
				// Settled: its apply or open ends with a touch, the
				// disk's recovery with a look at every partition.
				busy = busy || st != nil && p.applying.Load()
				delete(f.work, p)
			}
			continue
		}
		end, start := fetchPosition(p)
		pos := replfetch.Pos{LeaderEpoch: p.leaderEpoch.Load(), Offset: end, LogStart: start}
		if old, ok := f.session.Sent(p); ok && old == pos {
			delete(f.work, p) // the leader's session has it where it is
			continue
		}
		if !r.Room(p.topic) {
			// A later request of the session lists it. Held by the
			// leader's session where it was, it would be read there
			// again: the leader sent this log's newest records again at
			// every fetch and counted this follower behind, holding its
			// high watermark back until that later request (issue 19:
			// after a kill -9 the new leaders appended to 50,000
			// partitions at once, 8,000 listed a request). Forgotten,
			// it is sent nothing until listed, while the request has room
			// for the forget (a kill -9 at 300,000 partitions moved more
			// than 1 MiB of forgets' worth).
			r.ForgetIfRoom(p)
			more = true
			continue
		}
		r.List(p, replfetch.TopicPartition{Topic: p.topic, Partition: p.index}, pos, replicaPartitionMax, st)
		delete(f.work, p)
	}
	switch {
	case more:
		r.Req.MaxWaitMillis = 0
	case busy || f.epochs != nil:
		// Partitions settle meanwhile (an apply, an ask of epochs in the
		// background): they are listed by the next request.
		r.Req.MaxWaitMillis = int32(replicaBusyFetchWait / time.Millisecond)
	}
	f.m.stats.listed.Add(int64(r.Listed))
	return r.Req, f.session.Len()
}
