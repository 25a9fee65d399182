package kafkaproto

import (
	"cmp"
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// Only the connection's goroutine touches them, so they need no lock.

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

// fetchSession is one connection's fetch session.
type fetchSession struct {
	id    int32
	epoch int32 // the epoch the next request must carry
	full  bool  // the current request (re)created the session: answer every partition
	limit int   // the most partitions it may hold
	parts []*sessionPart
	index map[topicPartition]*sessionPart
}

// sessionPart is a partition in a session and what was last sent about it.
type sessionPart struct {
	target                        *fetchTarget
	sent                          bool
	sentHW, sentLSO, sentLogStart int64
}

// fetchTargets resolves the request's session fields: the session (nil for
// a sessionless fetch), the partitions to read, or a top-level error.
func fetchTargets(ctx context.Context, s *Server, req *kmsg.FetchRequest) (*fetchSession, []*fetchTarget, int16) {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if req.Version < 7 || st == nil {
		return nil, requestTargets(req), 0
	}
	switch {
	case req.SessionEpoch == -1: // full fetch, closing any session
		st.session = nil
		return nil, requestTargets(req), 0
	case req.SessionEpoch == 0: // full fetch, (re)creating the session
		st.session = nil
		targets := requestTargets(req)
		limit := s.sessionLimit(req, st)
		if len(targets) > limit {
			return nil, targets, 0
		}
		st.session = newFetchSession(s.sessionIDs.Add(1)&math.MaxInt32|1, targets)
		st.session.limit = limit
		return st.session, targets, 0
	}
	sess := st.session
	if sess == nil || sess.id != req.SessionID {
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != sess.epoch {
		return nil, nil, kerr.InvalidFetchSessionEpoch.Code
	}
	if !sess.update(req) {
		st.session = nil
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	}
	return sess, sess.targets(), 0
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

func newFetchSession(id int32, targets []*fetchTarget) *fetchSession {
	sess := &fetchSession{id: id, full: true, index: make(map[topicPartition]*sessionPart, len(targets))}
	for _, t := range targets {
		sess.put(t)
	}
	return sess
}

// put adds a partition or replaces its fetch position.
func (sess *fetchSession) put(t *fetchTarget) {
	key := topicPartition{t.topic, t.partition}
	if p, ok := sess.index[key]; ok {
		p.target = t
		return
	}
	p := &sessionPart{target: t}
	sess.index[key] = p
	sess.parts = append(sess.parts, p)
}

// update applies an incremental request; false when the session would grow
// past its limit.
func (sess *fetchSession) update(req *kmsg.FetchRequest) bool {
	sess.full = false
	for _, t := range requestTargets(req) {
		sess.put(t)
	}
	forgotten := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := topicPartition{ft.Topic, p}
			if _, ok := sess.index[key]; ok {
				delete(sess.index, key)
				forgotten = true
			}
		}
	}
	if forgotten {
		kept := sess.parts[:0]
		for _, p := range sess.parts {
			if sess.index[topicPartition{p.target.topic, p.target.partition}] == p {
				kept = append(kept, p)
			}
		}
		clear(sess.parts[len(kept):])
		sess.parts = kept
	}
	return len(sess.parts) <= sess.limit
}

func (sess *fetchSession) targets() []*fetchTarget {
	out := make([]*fetchTarget, len(sess.parts))
	for i, p := range sess.parts {
		out[i] = p.target
	}
	return out
}

// mustRespond reports whether a partition goes into the response, and
// records it as sent when it does.
func (sess *fetchSession) mustRespond(t *fetchTarget) bool {
	p := sess.index[topicPartition{t.topic, t.partition}]
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
