package kafkaproto

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Fetch, key 1: versions 4-17 (flexible from 12; from 13 topics are named by
// their id, an id this broker does not know is UNKNOWN_TOPIC_ID (fetchids.go);
// from 15 a follower names itself in ReplicaState). Fetch sessions (KIP-227,
// v7+) are kept per connection (fetchsession.go); without one every request
// is a full fetch. Long polling waits until MinBytes are available,
// MaxWaitMillis pass, a partition reports an error, or metadata changes.
// Response and partition byte limits follow KIP-74: the first partition
// with data returns at least one whole batch. Records are written straight
// from the broker's chunks (sendfile) by fetchwrite.go. With isolation_level
// 1 (read_committed) the broker reads below the last stable offset and the
// partition carries aborted_transactions (an empty array when none; null
// for read_uncommitted), which the client uses to drop aborted batches.
const (
	fetchKey = 1
	fetchMin = 4
	fetchMax = 17
)

// fetchTarget is one partition a Fetch reads: what the client asked for and
// what the last read found. The records chunk passes to the reply.
type fetchTarget struct {
	topic       string
	topicID     [16]byte // v13+: the id the client named; zero before
	partition   int32
	offset      int64
	maxBytes    int32
	leaderEpoch int32

	errCode           int16
	hw, lso, logStart int64
	aborted           []AbortedTransaction // read_committed: non-nil, maybe empty
	records           Chunk
	found             bool // the last read found records (records holds them, or they did not fit)
}

func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) *fetchReply {
	if req.Version >= 15 {
		req.ReplicaID = req.ReplicaState.ID // KIP-903 moved it
	}
	if req.Version >= 13 {
		s.resolveFetchTopicIDs(ctx, req)
	}
	if err := s.checkReplica(ctx, req.ReplicaID, "Fetch"); err != nil {
		fr := newFetchReply(req)
		fr.setErrCode(kapi.KafkaErr(err))
		return fr
	}
	sess, targets, code := fetchTargets(ctx, s, req)
	if code != 0 {
		fr := &fetchReply{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
		fr.ErrorCode = code
		return fr
	}
	if sess != nil {
		return buildFetchReply(req, sess, s.sessionPoll(ctx, req, sess))
	}
	s.longPoll(ctx, req, targets)
	return buildFetchReply(req, nil, targets)
}

// checkReplica refuses a request that acts as follower replicaID (>= 0)
// unless it came through the inter-broker door from that broker: a client
// that could claim a follower's id would move the high watermark and make
// the leader acknowledge acks=all writes no follower holds. Consumers
// (replicaID < 0) pass. A handler called without connection state (tests)
// is treated as a client.
func (s *Server) checkReplica(ctx context.Context, replicaID int32, api string) error {
	if replicaID < 0 {
		return nil
	}
	st, _ := ctx.Value(connStateKey{}).(*connState)
	switch {
	case st == nil || st.door != peerDoor:
		s.refused.Warn("replica request on the client port refused", "api", api, "replica_id", replicaID)
	case st.peerID >= 0 && st.peerID != replicaID:
		s.refused.Warn("replica request naming another broker refused", "api", api,
			"replica_id", replicaID, "peer_id", st.peerID)
	default:
		return nil
	}
	return fmt.Errorf("%w: replica id %d", ErrReplicaNotAuthorized, replicaID)
}

// requestTargets lists the partitions of a request, in request order,
// made in one array.
func requestTargets(req *kmsg.FetchRequest) []*fetchTarget {
	targets := make([]fetchTarget, requestPartitions(req))
	out := make([]*fetchTarget, 0, len(targets))
	for _, rt := range req.Topics {
		for i := range rt.Partitions {
			t := &targets[len(out)]
			t.position(rt.Topic, rt.TopicID, &rt.Partitions[i])
			out = append(out, t)
		}
	}
	return out
}

// requestPartitions counts the partitions a request names.
func requestPartitions(req *kmsg.FetchRequest) int {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	return n
}

// position sets t to what the request asks of a partition, forgetting
// what the last read found.
func (t *fetchTarget) position(topic string, topicID [16]byte, rp *kmsg.FetchRequestTopicPartition) {
	*t = fetchTarget{topic: topic, topicID: topicID, partition: rp.Partition, offset: rp.FetchOffset,
		maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch}
}

// longPoll reads the targets until enough bytes are there or the wait ends.
func (s *Server) longPoll(ctx context.Context, req *kmsg.FetchRequest, targets []*fetchTarget) {
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	for {
		waits := s.fetchWaits(ctx, targets)
		size, failed := s.fetchOnce(ctx, req, targets)
		wait := time.Until(deadline)
		if failed || int64(size) >= int64(req.MinBytes) || wait <= 0 || ctx.Err() != nil {
			return
		}
		for _, t := range targets {
			closeChunk(t.records)
			t.records = nil
		}
		timer := time.NewTimer(wait)
		waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
		reflect.Select(waits)
		timer.Stop()
	}
}

// sessionPoll is longPoll for a session's fetch: each round reads only the
// partitions with news (queued by their watches, or named by the request)
// and those whose last round found records, and a fetch waits for news of
// its own session, so its cost follows the partitions with news, not the
// session's size (issue 19). It returns the targets it read, in the order
// first read; a partition it found records or an error in is read again by
// the next fetch, as every partition was before.
func (s *Server) sessionPoll(ctx context.Context, req *kmsg.FetchRequest, sess *fetchSession) []*fetchTarget {
	now := time.Now()
	if sess.clock != nil {
		sess.clock.Tick(now) // the follower is where the session says, in every partition
	}
	deadline := now.Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	// The session's arrays of the last fetch are reused: a follower's
	// fetches of 100,000 partitions grew new ones by append each time.
	read, round, targets := sess.read[:0], sess.round[:0], sess.targets[:0]
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		sess.read, sess.round, sess.targets = read[:0], round[:0], targets[:0]
	}()
	for {
		_, metaChanged := s.broker.Cluster()
		batch, wake := sess.take()
		// Records found last round are read again: their chunks were closed.
		round = slices.DeleteFunc(round, func(p *sessionPart) bool {
			p.inRound = p.target.found
			return !p.inRound
		})
		for _, p := range batch {
			if !p.inRound {
				p.inRound = true
				round = append(round, p)
			}
		}
		sess.giveBack(batch)
		targets = targets[:0]
		for _, p := range round {
			// The listener is closing: no more partitions are attached or
			// read (fetchOnce). At 300,000 partitions a follower's round
			// attaching 111,000 partitions, each waiting for the broker's
			// lock behind the leadership moves being applied, held the
			// stop 1.3 s after Close (issue 19).
			if ctx.Err() != nil {
				break
			}
			// Attached before the read: a change after it is news. A
			// partition the broker could not attach it to (one it had
			// not applied yet, which the read may catch up with) is read
			// again by the next fetch, which attaches it.
			p.unwatched = sess.watcher.Watch(p.target.topic, p.target.partition, p.watch) != nil
			targets = append(targets, &p.target)
			if !p.read {
				p.read = true
				read = append(read, p)
			}
		}
		size, failed := s.fetchOnce(ctx, req, targets)
		wait := time.Until(deadline)
		if failed || int64(size) >= int64(req.MinBytes) || wait <= 0 || ctx.Err() != nil {
			break
		}
		for _, t := range targets {
			closeChunk(t.records)
			t.records = nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
		case <-metaChanged:
		case <-wake:
		case <-timer.C:
		}
	}
	// The session's too: buildFetchReply is done with it before the
	// next fetch.
	out := slices.Grow(sess.out[:0], len(read))[:len(read)]
	sess.out = out
	for i, p := range read {
		p.read, p.inRound = false, false
		out[i] = &p.target
		if p.target.errCode != 0 || p.target.found || p.unwatched {
			sess.mark(p)
		}
	}
	return out
}

// fetchWaits collects what ends a long poll early: the context, a metadata
// change and an advance of any target's high watermark. It is taken before
// reading, so that no advance is missed.
func (s *Server) fetchWaits(ctx context.Context, targets []*fetchTarget) []reflect.SelectCase {
	_, metaChanged := s.broker.Cluster()
	waits := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(metaChanged)},
	}
	for _, t := range targets {
		if ch := s.broker.Notify(t.topic, t.partition); ch != nil {
			waits = append(waits, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
	}
	return waits
}

// fetchOnce reads every target. It returns the bytes of records read and
// whether any partition failed.
func (s *Server) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, targets []*fetchTarget) (int, bool) {
	remaining := int64(math.MaxInt32)
	if req.MaxBytes > 0 {
		remaining = int64(req.MaxBytes)
	}
	total, failed := 0, false
	// full: the reply has no room for more records: none left, or a
	// partition's records did not fit what was left. The partitions after
	// are not read (issue 19: a follower's fetch of 100,000 partitions
	// read each one after its 16 MiB were full, to drop what it read);
	// their records wait for the next fetch, as those that did not fit.
	full := false
	cl, _ := s.broker.Cluster()
	for _, t := range targets {
		// The listener is closing (the only end of ctx): the partitions
		// left are not read. The answer goes nowhere (Close closed the
		// connection), and at 300,000 partitions reading a follower's
		// session held the stop ~2 s after Close (issue 19).
		if ctx.Err() != nil {
			t.hw, t.lso, t.logStart, t.errCode, t.records, t.found = -1, -1, -1, kerr.NotLeaderForPartition.Code, nil, false
			failed = true
			continue
		}
		if t.topicID != ([16]byte{}) && !topicHasID(cl, t.topic, t.topicID) {
			t.hw, t.lso, t.logStart, t.errCode, t.records, t.found = -1, -1, -1, kerr.UnknownTopicID.Code, nil, false
			failed = true
			continue
		}
		budget := max(min(int64(t.maxBytes), remaining), 1)
		res, err := s.broker.Fetch(ctx, FetchRequest{
			Topic:              t.topic,
			Partition:          t.partition,
			Offset:             t.offset,
			MaxBytes:           int(budget),
			CurrentLeaderEpoch: t.leaderEpoch,
			ReadCommitted:      req.IsolationLevel == 1,
			ReplicaID:          req.ReplicaID,
			NoRecords:          full || remaining <= 0, // only the offsets, and whether records wait
		})
		t.hw, t.lso, t.logStart, t.errCode, t.records = res.HighWatermark, res.LastStableOffset, res.LogStartOffset, 0, nil
		t.aborted, t.found = nil, false
		if req.IsolationLevel == 1 && err == nil {
			t.aborted = res.AbortedTransactions
			if t.aborted == nil {
				t.aborted = []AbortedTransaction{}
			}
		}
		if err != nil {
			closeChunk(res.Records)
			t.errCode = kapi.KafkaErr(err)
			if t.errCode == kerr.UnknownServerError.Code {
				s.log.Warn("fetch failed", "topic", t.topic, "partition", t.partition, "err", err)
			}
			failed = true
			continue
		}
		n := 0
		if res.Records != nil {
			n = res.Records.Len()
		}
		t.found = n > 0 || res.Pending
		// KIP-74: only the first data may exceed the limits.
		if total > 0 && int64(n) > remaining {
			full = true
		}
		if n == 0 || (total > 0 && int64(n) > budget) || remaining <= 0 {
			closeChunk(res.Records)
			continue
		}
		t.records = res.Records
		total += n
		remaining -= int64(n)
	}
	return total, failed
}

// buildFetchReply turns the targets into the response, grouped by topic.
// In an incremental session fetch only partitions with news are included.
// The reply takes over the targets' chunks. Each topic's partitions are
// carved from one array, sized by counting first: grown by append, a
// follower's answer of 100,000 partitions was copied about 17 times over.
func buildFetchReply(req *kmsg.FetchRequest, sess *fetchSession, targets []*fetchTarget) *fetchReply {
	fr := &fetchReply{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
	// The targets answered, each with its topic's index, and how many
	// each topic has.
	kept := targets[:0]
	topicOf := make([]int32, 0, len(targets))
	var counts []int
	topicIdx := make(map[string]int)
	last := -1
	for _, t := range targets {
		if sess != nil && !sess.mustRespond(t) {
			closeChunk(t.records)
			t.records = nil
			continue
		}
		// A topic's partitions usually come one after another.
		if last < 0 || fr.topics[last].name != t.topic {
			i, ok := topicIdx[t.topic]
			if !ok {
				i = len(fr.topics)
				topicIdx[t.topic] = i
				fr.topics = append(fr.topics, fetchTopic{name: t.topic, id: t.topicID})
				counts = append(counts, 0)
			}
			last = i
		}
		kept = append(kept, t)
		topicOf = append(topicOf, int32(last))
		counts[last]++
	}
	parts := make([]fetchPart, len(kept))
	for i := range fr.topics {
		t := &fr.topics[i]
		t.parts, parts = parts[:0:counts[i]], parts[counts[i]:]
	}
	for k, t := range kept {
		ft := &fr.topics[topicOf[k]]
		ft.parts = append(ft.parts, fetchPart{partition: t.partition, errCode: t.errCode,
			hw: t.hw, lso: t.lso, logStart: t.logStart, aborted: t.aborted, records: t.records})
		t.records = nil
	}
	if sess != nil {
		fr.SessionID = sess.id
		sess.responded()
	}
	return fr
}

func closeChunk(c Chunk) {
	if c != nil {
		c.Close()
	}
}

// newFetchReply is a reply mirroring the request's partitions, with no data.
func newFetchReply(req *kmsg.FetchRequest) *fetchReply {
	fr := &fetchReply{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	parts := make([]fetchPart, n)
	fr.topics = make([]fetchTopic, len(req.Topics))
	for i, rt := range req.Topics {
		t := &fr.topics[i]
		t.name, t.id = rt.Topic, rt.TopicID
		t.parts, parts = parts[:len(rt.Partitions):len(rt.Partitions)], parts[len(rt.Partitions):]
		for j, rp := range rt.Partitions {
			t.parts[j] = fetchPart{partition: rp.Partition, hw: -1, lso: -1, logStart: -1}
		}
	}
	return fr
}

// setErrCode sets every partition's error code.
func (fr *fetchReply) setErrCode(code int16) {
	for i := range fr.topics {
		for j := range fr.topics[i].parts {
			fr.topics[i].parts[j].errCode = code
		}
	}
}

func fetchError(req *kmsg.FetchRequest, code int16) *fetchReply {
	fr := newFetchReply(req)
	fr.ErrorCode = code
	fr.setErrCode(code)
	return fr
}
