package kafkaconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchAnswer is a Fetch response (Resp) read and decoded in memory kept
// from one answer to the next: the frame read, one array of every
// topic's partitions, one of their aborted transactions, and the topic
// names seen (issue 19: decoding a follower's answers with kmsg made
// every partition and topic anew, and a new frame, each round: 166 MB of
// a survivor's 2.26 GB in the 40 s after a kill -9 at 300,000
// partitions). Version 12, the one a follower sends, is decoded here,
// without an allocation per partition or topic once the arrays are large
// enough; other versions by kmsg, into the same frame.
//
// The record batches of Resp are not copied: they are slices of the
// frame, which the next Fetch into the same FetchAnswer overwrites. Its
// owner reuses a FetchAnswer only once nothing reads the answer before
// (server/broker's fetcher: once every apply of that answer is done);
// the zero value is ready to use. Unknown tagged fields are skipped, not
// kept (Resp's UnknownTags stay empty).
type FetchAnswer struct {
	Resp kmsg.FetchResponse

	frame   []byte
	parts   []kmsg.FetchResponseTopicPartition
	aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	ends    []int       // each topic's end in parts, while decoding
	spans   []abortSpan // each partition's aborted transactions, while decoding
	names   map[string]string
}

// Size is the bytes of the last answer's frame, and those the
// FetchAnswer keeps for the next.
func (a *FetchAnswer) Size() (used, kept int) { return len(a.frame), cap(a.frame) }

// abortSpan is where a partition's aborted transactions are in aborted.
type abortSpan struct{ part, start, end int }

// maxNames bounds the topic names a FetchAnswer keeps between answers.
const maxNames = 1 << 14

// Watch makes the end of ctx fail the request in flight at once, and
// every later Fetch, for the rest of the connection's life (Close stops
// the watch): a follower's fetch loop registers its context once, where
// Do with a context of its own for each request made a context, a timer
// and a registration a request (issue 19: 24 MB in 40 s). Call it once,
// before Fetch.
func (c *Conn) Watch(ctx context.Context) {
	c.watched = ctx
	c.unwatch = context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
}

// Fetch sends req and decodes its answer into a (see FetchAnswer),
// waiting at most timeout, or until the context the connection watches
// ends (its error then wraps the context's). After any error the
// connection's framing is lost: close it.
func (c *Conn) Fetch(timeout time.Duration, req *kmsg.FetchRequest, a *FetchAnswer) error {
	ctxErr := func() error {
		if c.watched == nil {
			return nil
		}
		return c.watched.Err()
	}
	if err := ctxErr(); err != nil {
		return fmt.Errorf("send Fetch: %w", err)
	}
	c.conn.SetDeadline(time.Now().Add(timeout))
	if err := ctxErr(); err != nil { // the watch may have run before the deadline was set
		return fmt.Errorf("send Fetch: %w", err)
	}
	a.Resp.SetVersion(req.GetVersion())
	body, err := c.roundTrip(req, a.Resp.IsFlexible(), func(n int) []byte {
		if cap(a.frame) < n {
			a.frame = make([]byte, n)
		}
		a.frame = a.frame[:n]
		return a.frame
	})
	if err == nil {
		if req.GetVersion() == 12 {
			err = a.decode(body)
		} else {
			err = a.Resp.ReadFrom(body)
		}
		if err != nil {
			err = fmt.Errorf("decode Fetch response: %w", err)
		}
	}
	if err != nil && ctxErr() != nil {
		return fmt.Errorf("Fetch: %w", ctxErr())
	}
	return err
}

var errFetchAnswer = errors.New("malformed Fetch v12 response")

// fetchReader reads a flexible response; any short read leaves bad set
// and reads zeros from then on.
type fetchReader struct {
	b   []byte
	bad bool
}

var zeros [8]byte

func (r *fetchReader) fixed(n int) []byte {
	if len(r.b) < n {
		r.bad, r.b = true, nil
		return zeros[:n]
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *fetchReader) int16() int16 { return int16(binary.BigEndian.Uint16(r.fixed(2))) }
func (r *fetchReader) int32() int32 { return int32(binary.BigEndian.Uint32(r.fixed(4))) }
func (r *fetchReader) int64() int64 { return int64(binary.BigEndian.Uint64(r.fixed(8))) }

func (r *fetchReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// length reads a compact length (n+1, 0 for null) of items at least min
// bytes each: -1 for null, or a count the bytes left can hold.
func (r *fetchReader) length(min int) int {
	v := r.uvarint()
	if v == 0 {
		return -1
	}
	if v-1 > uint64(len(r.b)/min) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(v - 1)
}

func (r *fetchReader) bytes(n int) []byte {
	if n < 0 {
		return nil
	}
	if n > len(r.b) {
		r.bad, r.b = true, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// tags reads a tagged-field section, calling known with each tag's key
// and bytes (nil: skip them all).
func (r *fetchReader) tags(known func(key uint64, b []byte)) {
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		key := r.uvarint()
		b := r.bytes(int(min(r.uvarint(), uint64(len(r.b)+1))))
		if known != nil && !r.bad {
			known(key, b)
		}
	}
}

// decode reads a Fetch v12 response body into a.Resp, as kmsg's
// ReadFrom does, into a's arrays.
func (a *FetchAnswer) decode(body []byte) error {
	r := fetchReader{b: body}
	resp := &a.Resp
	topics := resp.Topics[:0]
	*resp = kmsg.NewFetchResponse()
	resp.Version = 12
	resp.ThrottleMillis = r.int32()
	resp.ErrorCode = r.int16()
	resp.SessionID = r.int32()
	parts, aborted, ends, spans := a.parts[:0], a.aborted[:0], a.ends[:0], a.spans[:0]
	if a.names == nil || len(a.names) > maxNames {
		a.names = map[string]string{}
	}
	nt := max(r.length(2), 0)
	for range nt {
		name := r.bytes(r.length(1))
		topic, ok := a.names[string(name)]
		if !ok {
			topic = string(name)
			a.names[topic] = topic
		}
		topics = append(topics, kmsg.FetchResponseTopic{Topic: topic})
		np := max(r.length(37), 0)
		parts = slices.Grow(parts, np)
		for range np {
			parts = append(parts, kmsg.NewFetchResponseTopicPartition())
			p := &parts[len(parts)-1]
			p.Partition = r.int32()
			p.ErrorCode = r.int16()
			p.HighWatermark = r.int64()
			p.LastStableOffset = r.int64()
			p.LogStartOffset = r.int64()
			switch na := r.length(17); {
			case na == 0:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			case na > 0: // rare: set below, once aborted no longer grows
				spans = append(spans, abortSpan{part: len(parts) - 1, start: len(aborted)})
				for range na {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID = r.int64()
					at.FirstOffset = r.int64()
					r.tags(nil)
					aborted = append(aborted, at)
				}
				spans[len(spans)-1].end = len(aborted)
			}
			p.PreferredReadReplica = r.int32()
			p.RecordBatches = r.bytes(r.length(1))
			r.tags(func(key uint64, b []byte) {
				if !partitionTag(p, key, b) {
					r.bad = true
				}
			})
		}
		ends = append(ends, len(parts))
		r.tags(nil)
	}
	r.tags(nil)
	if r.bad || len(r.b) != 0 {
		return errFetchAnswer
	}
	start := 0
	for i := range topics {
		topics[i].Partitions = parts[start:ends[i]:ends[i]]
		start = ends[i]
	}
	for _, sp := range spans {
		parts[sp.part].AbortedTransactions = aborted[sp.start:sp.end:sp.end]
	}
	resp.Topics = topics
	a.parts, a.aborted, a.ends, a.spans = parts, aborted, ends, spans
	return nil
}

// partitionTag reads a partition's known tagged field: false when its
// bytes are not exactly the field (its struct and that struct's tagged
// fields). Strict on purpose: kmsg reads a nested tag section's count and
// loops that many times even past the end of its bytes, so a leader's
// malformed field could hold a follower's fetcher for as long as a count
// of 2^63 takes.
func partitionTag(p *kmsg.FetchResponseTopicPartition, key uint64, b []byte) bool {
	r := fetchReader{b: b}
	switch key {
	case 0:
		p.DivergingEpoch.Epoch = r.int32()
		p.DivergingEpoch.EndOffset = r.int64()
	case 1:
		p.CurrentLeader.LeaderID = r.int32()
		p.CurrentLeader.LeaderEpoch = r.int32()
	case 2:
		p.SnapshotID.EndOffset = r.int64()
		p.SnapshotID.Epoch = r.int32()
	default:
		return true // unknown: skipped
	}
	r.tags(nil)
	return !r.bad && len(r.b) == 0
}

// roundTrip writes req and reads its answer's body (past the correlation
// id and, for a flexible response, the header's tags) into the buffer
// buf makes of the frame's size.
func (c *Conn) roundTrip(req kmsg.Request, flexible bool, buf func(n int) []byte) ([]byte, error) {
	c.corr++
	c.buf = c.format.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, fmt.Errorf("send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxReplicaResponse {
		return nil, fmt.Errorf("read %s response: frame of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := buf(int(n))
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("read %s response: correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, c.corr)
	}
	body = body[4:]
	if flexible && req.Key() != 18 {
		// The response header's tagged fields: none are defined, so skip them.
		tags, n := binary.Uvarint(body)
		if n <= 0 {
			return nil, fmt.Errorf("read %s response: bad header tags", kmsg.NameForKey(req.Key()))
		}
		body = body[n:]
		for i := uint64(0); i < tags; i++ {
			_, n1 := binary.Uvarint(body)
			l, n2 := binary.Uvarint(body[max(n1, 0):])
			if n1 <= 0 || n2 <= 0 || uint64(len(body)) < uint64(n1+n2)+l {
				return nil, fmt.Errorf("read %s response: bad header tag", kmsg.NameForKey(req.Key()))
			}
			body = body[uint64(n1+n2)+l:]
		}
	}
	return body, nil
}
