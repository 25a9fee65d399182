package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/broker/kafkaconn"
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
// twice a second).
//
// A request lists at most maxFetchPartitions (the leader bounds requests
// but Produce to 1 MiB): a session holding more is filled over several
// requests. A leader that keeps no session for us (it answers session id
// 0) is fetched from with full requests listing every partition, as before.
// The session lives in the connection; it is reset with it, and after the
// leader lost it (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH).
const maxFetchPartitions = 8000

// replicaSession is owned by its leaderFetcher's run goroutine.
type replicaSession struct {
	id int32
	// epoch is the next request's: 0 opens a session, -1 means the
	// leader keeps none for us (every request is full).
	epoch int32
	sent  map[*Partition]sentFetch      // what the leader's session holds per partition
	byKey map[topicPartition]*Partition // the same partitions by name, for the answer
}

// sentFetch is a partition's fetch position as last sent.
type sentFetch struct {
	leaderEpoch      int32
	offset, logStart int64
}

type topicPartition struct {
	topic string
	index int32
}

func (s *replicaSession) reset() {
	s.id, s.epoch = 0, 0
	clear(s.sent)
	clear(s.byKey)
}

func (s *replicaSession) put(p *Partition, pos sentFetch) {
	if s.sent == nil {
		s.sent, s.byKey = map[*Partition]sentFetch{}, map[topicPartition]*Partition{}
	}
	s.sent[p] = pos
	s.byKey[topicPartition{p.topic, p.index}] = p
}

func (s *replicaSession) drop(p *Partition) {
	delete(s.sent, p)
	delete(s.byKey, topicPartition{p.topic, p.index})
}

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
func (f *leaderFetcher) fetch(conn *kafkaconn.Conn, parts map[*Partition]*followState) error {
	s := &f.session
	req, ready := f.fetchRequest(parts)
	if ready == 0 {
		f.sleep(replicaRetryBackoff)
		return nil
	}
	resp := kmsg.NewPtrFetchResponse()
	ctx, cancel := context.WithTimeout(f.m.ctx, replicaFetchWait+30*time.Second)
	defer cancel()
	if err := conn.Do(ctx, req, resp); err != nil {
		return err
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch):
		f.m.logger.Debug("replica fetch session lost", "leader", f.leader, "err", err)
		s.reset() // the next request opens a new one
		return nil
	case err != nil:
		return fmt.Errorf("fetch from leader %d: %w", f.leader, err)
	}
	switch {
	case req.SessionEpoch == 0 && resp.SessionID == 0:
		s.epoch = -1 // the leader keeps no session for us: full fetches from now on
	case req.SessionEpoch == 0:
		s.id, s.epoch = resp.SessionID, 1
	case req.SessionEpoch == math.MaxInt32:
		s.epoch = 1
	case req.SessionEpoch > 0:
		s.epoch++
	}
	if f.applyAnswer(resp, parts, s) {
		f.sleep(replicaRetryBackoff)
	}
	return nil
}

// fetchRequest builds the next request of the session: a full one (epoch 0
// or without a session) lists every ready partition, an incremental one
// those whose position changed and forgets those no longer ready. ready
// counts the partitions being replicated.
func (f *leaderFetcher) fetchRequest(parts map[*Partition]*followState) (req *kmsg.FetchRequest, ready int) {
	s := &f.session
	req = kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = f.m.self
	req.MaxWaitMillis = int32(replicaFetchWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	if s.epoch <= 0 {
		req.SessionID = 0
		clear(s.sent)
		clear(s.byKey)
	}
	byTopic := map[string]int{}
	listed := 0
	for p, st := range parts {
		if !readyToFetch(p, st) {
			continue
		}
		ready++
		end, start := fetchPosition(p)
		pos := sentFetch{leaderEpoch: p.leaderEpoch.Load(), offset: end, logStart: start}
		if old, ok := s.sent[p]; ok && old == pos {
			continue // the leader's session has it where it is
		}
		if s.epoch >= 0 && listed >= maxFetchPartitions {
			continue // a later request of the session adds it
		}
		i, ok := byTopic[p.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[p.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.index
		rp.CurrentLeaderEpoch = pos.leaderEpoch
		rp.FetchOffset = pos.offset
		rp.LogStartOffset = pos.logStart
		rp.PartitionMaxBytes = replicaPartitionMax
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		s.put(p, pos)
		listed++
	}
	if s.epoch > 0 {
		forgotten := map[string]int{}
		for p := range s.sent {
			if st, ok := parts[p]; ok && readyToFetch(p, st) {
				continue
			}
			i, ok := forgotten[p.topic]
			if !ok {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic = p.topic
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
				i = len(req.ForgottenTopics) - 1
				forgotten[p.topic] = i
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, p.index)
			s.drop(p)
		}
	}
	return req, ready
}
