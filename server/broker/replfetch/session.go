package replfetch

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxRequestBytes bounds what one request of a session lists and
// forgets, encoded (the leader reads a request but Produce up to 1 MiB;
// this leaves room for the forgotten partitions a request must carry
// however many moved): a session holding more is filled over several
// requests. A request without a session lists all. A count (8,000
// partitions) bounded it before: a request of topics with long names
// could pass 1 MiB, and 8,000 a request was too few when a leader
// appended to 45,000 partitions at once, whose new positions each reach
// the leader only in a request that lists them (issue 19).
const MaxRequestBytes = 640 << 10

// maxForgetBytes bounds a request with the forgets ForgetIfRoom adds
// (under the leader's 1 MiB, with room for the request's header).
const maxForgetBytes = 1<<20 - 64<<10

// Encoded sizes in a Fetch request (v12, flexible): a listed partition
// (partition, current leader epoch, fetch offset, last fetched epoch, log
// start offset, partition max bytes, tags), a forgotten one, and a topic
// besides its name (compact string and array lengths, tags; at most 3
// bytes each below 2 M partitions).
const (
	listedBytes    = 33
	forgottenBytes = 4
	topicBytes     = 7
)

// PerRequest is how many partitions of one topic named topic a request
// lists at most.
func PerRequest(topic string) int {
	return (MaxRequestBytes - len(topic) - topicBytes) / listedBytes
}

// Pos is a partition's fetch position as a request sends it.
type Pos struct {
	LeaderEpoch      int32
	Offset, LogStart int64
}

// TopicPartition names a partition on the wire.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Session is the follower's side of a fetch session with one leader: the
// position the leader's session holds for each partition (keyed K, with
// the state V the fetcher applies its answer with). The zero value opens a
// session with its first request.
type Session[K comparable, V any] struct {
	id int32
	// epoch is the next request's: 0 opens a session, -1 means the
	// leader keeps none for us (every request is full).
	epoch int32
	sent  map[K]held[V]
	byKey map[TopicPartition]K
	// next is the request NewRequest returns, its memory reused from
	// the one before (issue 19: building each request's partition list
	// anew was 108 MB of a survivor's 2.26 GB in the 40 s after a kill
	// -9 at 300,000 partitions).
	next Request[K, V]
}

type held[V any] struct {
	pos Pos
	tp  TopicPartition
	v   V
}

// Full reports whether the next request is a full one: it opens a session
// or the leader keeps none, and lists every partition to fetch.
func (s *Session[K, V]) Full() bool { return s.epoch <= 0 }

// Epoch is the next request's session epoch (0: it opens one, -1: none).
func (s *Session[K, V]) Epoch() int32 { return s.epoch }

// Len is how many partitions the session holds.
func (s *Session[K, V]) Len() int { return len(s.sent) }

// Reset forgets the session: the next request opens a new one. The
// session lives in its connection: reset it with it, and when the leader
// lost it.
func (s *Session[K, V]) Reset() {
	s.id, s.epoch = 0, 0
	clear(s.sent)
	clear(s.byKey)
}

// Sent returns where the session holds k, and whether it does.
func (s *Session[K, V]) Sent(k K) (Pos, bool) {
	h, ok := s.sent[k]
	return h.pos, ok
}

// Lookup returns the partition an answer names, the position its fetch
// was sent at and its state; ok is false for a partition not held.
func (s *Session[K, V]) Lookup(topic string, partition int32) (k K, pos Pos, v V, ok bool) {
	k, ok = s.byKey[TopicPartition{topic, partition}]
	if !ok {
		return k, pos, v, false
	}
	h := s.sent[k]
	return k, h.pos, h.v, true
}

// Request is one fetch request of a session being built.
type Request[K comparable, V any] struct {
	Req       *kmsg.FetchRequest
	Listed    int // partitions listed
	size      int // bytes listed and forgotten (MaxRequestBytes)
	s         *Session[K, V]
	topics    map[string]int
	forgotten map[string]int
}

// NewRequest starts the session's next request from replica, waiting at
// most wait for at least one byte and at most maxBytes. A full request
// starts the session's positions over. The request is built in the
// memory of the one before, which must no longer be used (its Req
// neither): a session's requests are sent one at a time.
func (s *Session[K, V]) NewRequest(replica int32, wait time.Duration, maxBytes int32) *Request[K, V] {
	r := &s.next
	if r.Req == nil {
		r.Req = kmsg.NewPtrFetchRequest()
	}
	topics, forgotten := r.Req.Topics[:0], r.Req.ForgottenTopics[:0]
	req := r.Req
	*req = kmsg.NewFetchRequest()
	req.Topics, req.ForgottenTopics = topics, forgotten
	req.SetVersion(12)
	req.ReplicaID = replica
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	if s.epoch <= 0 {
		req.SessionID = 0
		clear(s.sent)
		clear(s.byKey)
	}
	if s.sent == nil {
		s.sent, s.byKey = map[K]held[V]{}, map[TopicPartition]K{}
	}
	clear(r.topics)
	clear(r.forgotten)
	r.Listed, r.size, r.s = 0, 0, s
	return r
}

// Room reports whether the request may list another partition of topic.
func (r *Request[K, V]) Room(topic string) bool {
	return r.s.epoch < 0 || r.size+r.cost(r.topics, topic, listedBytes) <= MaxRequestBytes
}

// cost is the bytes a partition of topic adds, each costing each, to a
// request whose topics so far are topics.
func (r *Request[K, V]) cost(topics map[string]int, topic string, each int) int {
	if _, ok := topics[topic]; ok {
		return each
	}
	return each + len(topic) + topicBytes
}

// List lists k (tp on the wire) at pos, reading at most maxBytes of it;
// the session holds it there from now on, with state v.
func (r *Request[K, V]) List(k K, tp TopicPartition, pos Pos, maxBytes int32, v V) {
	r.size += r.cost(r.topics, tp.Topic, listedBytes)
	i, ok := r.topics[tp.Topic]
	if !ok {
		i = len(r.Req.Topics)
		r.Req.Topics = reuseTail(r.Req.Topics)
		t := &r.Req.Topics[i]
		parts := t.Partitions[:0]
		*t = kmsg.NewFetchRequestTopic()
		t.Topic, t.Partitions = tp.Topic, parts
		if r.topics == nil {
			r.topics = map[string]int{}
		}
		r.topics[tp.Topic] = i
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.CurrentLeaderEpoch = pos.LeaderEpoch
	rp.FetchOffset = pos.Offset
	rp.LogStartOffset = pos.LogStart
	rp.PartitionMaxBytes = maxBytes
	r.Req.Topics[i].Partitions = append(r.Req.Topics[i].Partitions, rp)
	r.s.sent[k] = held[V]{pos: pos, tp: tp, v: v}
	r.s.byKey[tp] = k
	r.Listed++
}

// Forget stops fetching k: an incremental request tells the leader's
// session to forget it.
func (r *Request[K, V]) Forget(k K) {
	h, ok := r.s.sent[k]
	if !ok {
		return
	}
	delete(r.s.sent, k)
	delete(r.s.byKey, h.tp)
	if r.s.epoch <= 0 {
		return
	}
	r.size += r.cost(r.forgotten, h.tp.Topic, forgottenBytes)
	i, ok := r.forgotten[h.tp.Topic]
	if !ok {
		i = len(r.Req.ForgottenTopics)
		r.Req.ForgottenTopics = reuseTail(r.Req.ForgottenTopics)
		ft := &r.Req.ForgottenTopics[i]
		parts := ft.Partitions[:0]
		*ft = kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = h.tp.Topic, parts
		if r.forgotten == nil {
			r.forgotten = map[string]int{}
		}
		r.forgotten[h.tp.Topic] = i
	}
	r.Req.ForgottenTopics[i].Partitions = append(r.Req.ForgottenTopics[i].Partitions, h.tp.Partition)
}

// reuseTail is s one element longer: the element past its length when
// its array has one (the caller keeps what it holds worth keeping, its
// partitions' array), a zero one appended otherwise.
func reuseTail[T any](s []T) []T {
	if len(s) < cap(s) {
		return s[:len(s)+1]
	}
	var zero T
	return append(s, zero)
}

// ForgetIfRoom forgets k, as Forget does, when the request has room for
// it within maxForgetBytes, and reports whether it did: for a forget that
// may wait for a later request (a partition held at an old position),
// where Forget's must not (a partition no longer fetched).
func (r *Request[K, V]) ForgetIfRoom(k K) bool {
	h, ok := r.s.sent[k]
	if !ok || (r.s.epoch > 0 && r.size+r.cost(r.forgotten, h.tp.Topic, forgottenBytes) > maxForgetBytes) {
		return false
	}
	r.Forget(k)
	return true
}

// ErrSessionLost: the leader lost the session (FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH); the session was reset and the next
// request opens a new one.
var ErrSessionLost = errors.New("fetch session lost")

// Answered moves the session on after the leader answered req: to the
// session it granted, its next epoch, or none (the leader keeps none for
// us: full requests from now on).
func (s *Session[K, V]) Answered(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) error {
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch):
		s.Reset()
		return fmt.Errorf("%w: %w", ErrSessionLost, err)
	case err != nil:
		return err
	}
	switch {
	case req.SessionEpoch == 0 && resp.SessionID == 0:
		s.epoch = -1
	case req.SessionEpoch == 0:
		s.id, s.epoch = resp.SessionID, 1
	case req.SessionEpoch == math.MaxInt32:
		s.epoch = 1
	case req.SessionEpoch > 0:
		s.epoch++
	}
	return nil
}
