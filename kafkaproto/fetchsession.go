package kafkaproto

import (
	"cmp"
	"context"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Fetch sessions (KIP-227). A client that sends SessionEpoch 0 gets a
// session id; later requests with that id and the next epoch list only the
// partitions whose fetch position changed (and ForgottenTopics to drop),
// and the response lists only partitions with news: records, an error, or
// a changed high watermark, last stable offset or log start offset.
//
// Sessions live in their connection (connState) and die with it: a client
// that moves to another connection gets FETCH_SESSION_ID_NOT_FOUND and
// starts over with a full fetch, as clients do after any session error.
//
// A session's fetch reads only the partitions with news (issue 19: each
// fetch read every partition of the session and waited on every one's
// channel, so an idle follower's fetches of 20,000 partitions cost the
// leader 2.5-3.6 CPU s per 30 s with nothing produced). Each partition of
// a session carries a Watch the broker calls on any change a fetch could
// see (kapi/watch.go); the call queues the partition and wakes the
// session's waiting fetch. A fetch reads what is queued, what the request
// names, and again what last returned records or an error. A broker that
// cannot watch (no kapi.PartitionWatcher) gets no sessions. A follower's
// session also ticks a FetchClock at each fetch: the leader counts it as a
// fetch, at the session's position, of every partition the session holds.
//
// The connection's goroutine owns a session; only its queue (and the
// parts' queued and gone flags) is shared with the partitions' watches,
// under fetchSession.mu, which nothing holds while calling the broker.

// maxSessionPartitions bounds a client's session; a larger fetch runs
// sessionless. A follower's session (a replica fetch through the
// inter-broker door) is bounded by Options.MaxReplicaSessionPartitions
// instead: a follower fetches every partition it follows from a leader in
// one session, and without one an idle follower lists them all twice a
// second (issue 19).
const maxSessionPartitions = 10_000

// DefaultMaxReplicaSessionPartitions is Options.MaxReplicaSessionPartitions
// when zero.
const DefaultMaxReplicaSessionPartitions = 100_000

// connState is per-connection state that handlers reach through the
// request context.
type connState struct {
	session *fetchSession
	door    door  // the door the connection came through
	peerID  int32 // on the peer door, the node id the peer claimed; -1 unknown
	tls     bool  // the connection is TLS: brokers are advertised by their SSL endpoints
	// Authentication (sasl.go): the principal ("User:alice"; "" anonymous;
	// a SASL login replaces a certificate's), whether a TLS client
	// certificate was looked at, SASL progress.
	principal   string
	certChecked bool
	saslDone    bool // a SASL login succeeded: only a re-authentication may follow
	sasl        saslState
	// Re-authentication (Options.MaxReauth, KIP-368): the mechanism of the
	// last login (a re-authentication must use it again), when its session
	// ends (zero: never), and closeNow, set by a handler whose response is
	// the connection's last (a refused re-authentication).
	saslMech      string
	sessionExpiry time.Time
	closeNow      bool
}

type connStateKey struct{}

func withConnState(ctx context.Context, st *connState) context.Context {
	return context.WithValue(ctx, connStateKey{}, st)
}

type topicPartition struct {
	topic     string
	partition int32
}

// fetchSession is one connection's fetch session. Its fields but mu's are
// the connection goroutine's.
type fetchSession struct {
	id    int32
	epoch int32 // the epoch the next request must carry
	full  bool  // the current request (re)created the session: answer every partition
	limit int   // the most partitions it may hold
	index map[topicPartition]*sessionPart
	// watcher attaches the parts' watches; replica is the follower's id
	// (-1: a client's session) and clock ticks at each of its fetches.
	watcher PartitionWatcher
	replica int32
	clock   *FetchClock

	mu    sync.Mutex
	queue []*sessionPart // guarded by mu: parts with news since their last read
	spare []*sessionPart // guarded by mu: the queue's other array, reused
	// wake is closed when a part is queued; nil until a fetch takes it.
	// Guarded by mu.
	wake chan struct{}

	// fresh holds parts made in one array for the partitions of the
	// request creating the session, not used yet (put takes them in turn).
	fresh []sessionPart
	// sessionPoll's arrays, kept for the next fetch (out: the targets it
	// returns, which buildFetchReply is done with before then).
	read, round []*sessionPart
	targets     []*fetchTarget
	out         []*fetchTarget
}

// sessionPart is a partition in a session and what was last sent about it.
type sessionPart struct {
	target                        fetchTarget
	watch                         *Watch
	sent                          bool
	sentHW, sentLSO, sentLogStart int64
	read, inRound                 bool // this request read it; this round reads it
	unwatched                     bool // its watch could not be attached this request

	queued, gone bool // guarded by the session's mu
}

// fetchTargets resolves the request's session fields: the session (nil for
// a sessionless fetch), the partitions to read (of a sessionless fetch:
// a session's are read by sessionPoll), or a top-level error.
func fetchTargets(ctx context.Context, s *Server, req *kmsg.FetchRequest) (*fetchSession, []*fetchTarget, int16) {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if req.Version < 7 || st == nil {
		return nil, requestTargets(req), 0
	}
	switch {
	case req.SessionEpoch == -1: // full fetch, closing any session
		st.endSession()
		return nil, requestTargets(req), 0
	case req.SessionEpoch == 0: // full fetch, (re)creating the session
		st.endSession()
		n := requestPartitions(req)
		limit := s.sessionLimit(req, st)
		watcher, ok := s.broker.(PartitionWatcher)
		if n > limit || !ok {
			return nil, requestTargets(req), 0
		}
		replica := int32(-1)
		if req.ReplicaID >= 0 {
			replica = req.ReplicaID // fetch checked it names the peer
		}
		st.session = newFetchSession(s.sessionIDs.Add(1)&math.MaxInt32|1, limit, watcher, replica, n)
		st.session.putAll(req)
		return st.session, nil, 0
	}
	sess := st.session
	if sess == nil || sess.id != req.SessionID {
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != sess.epoch {
		return nil, nil, kerr.InvalidFetchSessionEpoch.Code
	}
	if !sess.update(req) {
		st.endSession()
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	}
	return sess, nil, 0
}

// endSession closes the connection's session, if any.
func (st *connState) endSession() {
	if st.session != nil {
		st.session.close()
		st.session = nil
	}
}

// sessionLimit bounds the session req opens: a replica's (fetch checks
// the replica id came through the inter-broker door before this) or a
// client's.
func (s *Server) sessionLimit(req *kmsg.FetchRequest, st *connState) int {
	if req.ReplicaID >= 0 && st.door == peerDoor {
		return cmp.Or(s.opts.MaxReplicaSessionPartitions, DefaultMaxReplicaSessionPartitions)
	}
	return maxSessionPartitions
}

// newFetchSession makes a session for a request of n partitions.
func newFetchSession(id int32, limit int, watcher PartitionWatcher, replica int32, n int) *fetchSession {
	sess := &fetchSession{id: id, full: true, limit: limit, index: make(map[topicPartition]*sessionPart, n),
		watcher: watcher, replica: replica, fresh: make([]sessionPart, n)}
	if replica >= 0 {
		sess.clock = new(FetchClock)
	}
	return sess
}

// putAll puts every partition the request names, in request order.
func (sess *fetchSession) putAll(req *kmsg.FetchRequest) {
	for _, rt := range req.Topics {
		for i := range rt.Partitions {
			sess.put(rt.Topic, rt.TopicID, &rt.Partitions[i])
		}
	}
}

// put adds a partition or replaces its fetch position; either way it is
// read by the next fetch.
func (sess *fetchSession) put(topic string, topicID [16]byte, rp *kmsg.FetchRequestTopicPartition) {
	key := topicPartition{topic, rp.Partition}
	p, ok := sess.index[key]
	if !ok {
		if len(sess.fresh) > 0 {
			p, sess.fresh = &sess.fresh[0], sess.fresh[1:]
		} else {
			p = &sessionPart{}
		}
		p.watch = kapi.NewWatch(func() { sess.mark(p) }, sess.replica, sess.clock)
		sess.index[key] = p
	}
	p.target.position(topic, topicID, rp)
	p.watch.SetPosition(rp.FetchOffset)
	sess.mark(p)
}

// drop removes a part whose key is out of the index already.
func (sess *fetchSession) drop(p *sessionPart) {
	sess.mu.Lock()
	p.gone = true
	sess.mu.Unlock()
	p.watch.Close()
}

// close ends the session: its positions no longer count (the clock stops)
// and no partition calls it any more.
func (sess *fetchSession) close() {
	if sess.clock != nil {
		sess.clock.Stop()
	}
	for key, p := range sess.index {
		delete(sess.index, key)
		sess.drop(p)
	}
}

// update applies an incremental request; false when the session would grow
// past its limit.
func (sess *fetchSession) update(req *kmsg.FetchRequest) bool {
	sess.full = false
	sess.putAll(req)
	for _, ft := range req.ForgottenTopics {
		for _, i := range ft.Partitions {
			key := topicPartition{ft.Topic, i}
			if p, ok := sess.index[key]; ok {
				delete(sess.index, key)
				sess.drop(p)
			}
		}
	}
	return len(sess.index) <= sess.limit
}

// mark queues p for the next read and wakes a waiting fetch. Partitions
// call it (through p's watch) from any goroutine.
func (sess *fetchSession) mark(p *sessionPart) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if p.queued || p.gone {
		return
	}
	p.queued = true
	sess.queue = append(sess.queue, p)
	if sess.wake != nil {
		close(sess.wake)
		sess.wake = nil
	}
}

// take returns the queued parts (to hand back with giveBack) and a channel
// closed when the next one is queued.
func (sess *fetchSession) take() ([]*sessionPart, <-chan struct{}) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	batch := sess.queue
	sess.queue, sess.spare = sess.spare[:0], nil
	kept := batch[:0]
	for _, p := range batch {
		p.queued = false
		if !p.gone {
			kept = append(kept, p)
		}
	}
	clear(batch[len(kept):])
	if sess.wake == nil {
		sess.wake = make(chan struct{})
	}
	return kept, sess.wake
}

// giveBack returns take's array for reuse.
func (sess *fetchSession) giveBack(batch []*sessionPart) {
	clear(batch)
	sess.mu.Lock()
	if sess.spare == nil {
		sess.spare = batch[:0]
	}
	sess.mu.Unlock()
}

// mustRespond reports whether a partition goes into the response, and
// records it as sent when it does.
func (sess *fetchSession) mustRespond(t *fetchTarget) bool {
	p := sess.index[topicPartition{t.topic, t.partition}]
	if p == nil {
		return true
	}
	news := sess.full || !p.sent || t.errCode != 0 || (t.records != nil && t.records.Len() > 0) ||
		t.hw != p.sentHW || t.lso != p.sentLSO || t.logStart != p.sentLogStart
	if news {
		p.sent, p.sentHW, p.sentLSO, p.sentLogStart = true, t.hw, t.lso, t.logStart
	}
	return news
}

// responded moves the session to the next epoch after a response.
func (sess *fetchSession) responded() {
	sess.full = false
	if sess.epoch == math.MaxInt32 {
		sess.epoch = 1
	} else {
		sess.epoch++
	}
}
