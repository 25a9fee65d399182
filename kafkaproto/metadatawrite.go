package kafkaproto

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Metadata response for every topic is one frame, as in Kafka: at
// 1,000,000 partitions about 26 MB (v9+; 34 bytes a partition before).
// Built as kmsg structs (~100 bytes a partition) and encoded into one
// growing buffer, it cost ~375 bytes a partition of garbage per request
// (BenchmarkMetadataAllTopics). metadataReply instead sizes the response
// first (arithmetic over the cluster, no encoding) and then writes it topic
// by topic through the connection's buffer, flushed every writeChunk bytes:
// each topic is a kmsg struct only while it is encoded (kmsg itself encodes
// it, so the bytes are exactly what the struct path sent), and the
// listener holds one topic's partitions at a time.
//
// Every answer without authorization takes this path (serveMetadata):
// for every topic, and for topics named (franz-go and the Java client name
// the topics they use, so their refreshes after a failover answered every
// partition of a 300,000-partition cluster through kmsg structs and one
// buffer grown by appends: 45 % of what a survivor allocated in the first
// 40 s after a kill -9, issue 19). Answers filtered by the caller's
// permissions (filterMetadata, on kmsg's response) go through metadata.
type metadataReply struct {
	*kmsg.MetadataResponse // everything but Topics
	topics                 []metadataEntry
	// leaders holds the error code of a partition led by each broker the
	// response lists (listedLeader, decided on the handler's goroutine:
	// the writer has no request context); a leader not in it is
	// LEADER_NOT_AVAILABLE.
	leaders map[int32]int16
}

// writeChunk is how much of a streamed response is buffered between writes.
const writeChunk = 64 << 10

// serveMetadata answers Metadata: without authorization as a
// metadataReply, with it through metadata (filtered afterwards).
func (s *Server) serveMetadata(ctx context.Context, req *kmsg.MetadataRequest) kmsg.Response {
	if s.opts.RequireAuth {
		return s.metadata(ctx, req)
	}
	resp, cl, topics := s.metadataTopics(ctx, req)
	r := &metadataReply{MetadataResponse: resp, topics: topics, leaders: map[int32]int16{}}
	for i := range cl.Brokers {
		b := &cl.Brokers[i]
		if _, code := listedLeader(ctx, cl, b.ID); code != kerr.LeaderNotAvailable.Code {
			r.leaders[b.ID] = code
		}
	}
	return r
}

// metadataFail is metadataError for the handler table.
func metadataFail(req *kmsg.MetadataRequest, code int16) kmsg.Response {
	return metadataError(req, code)
}

// leader is listedLeader from the table serveMetadata made.
func (r *metadataReply) leader(id int32) (int32, int16) {
	code, ok := r.leaders[id]
	switch {
	case !ok:
		return -1, kerr.LeaderNotAvailable.Code
	case code != 0:
		return -1, code
	}
	return id, 0
}

// topic fills mt (reusing its partitions) as metadataTopic would.
func (r *metadataReply) topic(mt *kmsg.MetadataResponseTopic, t *TopicInfo) {
	parts := mt.Partitions[:0]
	*mt = kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p.Partition, p.LeaderEpoch
		mp.Leader, mp.ErrorCode = r.leader(p.Leader)
		mp.Replicas, mp.ISR, mp.OfflineReplicas = orEmpty(p.Replicas), orEmpty(p.ISR), orEmpty(p.Offline)
		parts = append(parts, mp)
	}
	mt.Partitions = parts
}

// tailLen is the bytes after the topics array: the cluster's authorized
// operations (v8-10), the error code (v13+) and the empty tag section
// (v9+).
func (r *metadataReply) tailLen() int {
	n := 0
	if v := r.Version; v >= 8 && v <= 10 {
		n += 4
	}
	if r.Version >= 13 {
		n += 2
	}
	if r.IsFlexible() {
		n++
	}
	return n
}

// arrayLen is the bytes an array length of n takes.
func (r *metadataReply) arrayLen(n int) int {
	if r.IsFlexible() {
		return kbin.UvarintLen(uint32(n + 1))
	}
	return 4
}

// topicSize is the bytes t takes in the topics array.
func (r *metadataReply) topicSize(t *TopicInfo) int {
	v := r.Version
	n := 2 + len(t.Name) // error code, name
	if r.IsFlexible() {
		n += kbin.UvarintLen(uint32(len(t.Name) + 1))
	} else {
		n += 2
	}
	if v >= 10 {
		n += 16 // topic id
	}
	if v >= 1 {
		n++ // is internal
	}
	n += r.arrayLen(len(t.Partitions))
	for i := range t.Partitions {
		p := &t.Partitions[i]
		n += 2 + 4 + 4 // error code, partition, leader
		if v >= 7 {
			n += 4 // leader epoch
		}
		n += r.arrayLen(len(p.Replicas)) + 4*len(p.Replicas) + r.arrayLen(len(p.ISR)) + 4*len(p.ISR)
		if v >= 5 {
			n += r.arrayLen(len(p.Offline)) + 4*len(p.Offline)
		}
		if r.IsFlexible() {
			n++ // tags
		}
	}
	if v >= 8 {
		n += 4 // authorized operations
	}
	if r.IsFlexible() {
		n++ // tags
	}
	return n
}

// writeTo writes prefix (a 4-byte size placeholder and the response
// header) and the response to w, as fetchReply.writeTo does; it returns
// the buffer it used, for reuse. The size written first is checked
// against the bytes that follow: a mismatch closes the connection rather
// than send a corrupt frame.
func (r *metadataReply) writeTo(w io.Writer, prefix []byte) ([]byte, error) {
	// The response without topics: its encoding ends with an empty
	// topics array and the tail; a one-topic response is the same with
	// the topic's bytes between them (the array's length takes as many
	// bytes for 0 as for 1).
	empty := *r.MetadataResponse
	empty.Topics = nil
	base := len(prefix)
	buf := empty.AppendTo(prefix)
	tail := append([]byte(nil), buf[len(buf)-r.tailLen():]...)
	headEnd := len(buf) - r.tailLen() - r.arrayLen(0)
	headLen := headEnd - base
	one := empty
	one.Topics = make([]kmsg.MetadataResponseTopic, 1)
	var scratch []byte
	// topicBytes is the one topic of one's encoding in scratch.
	topicBytes := func() []byte { return scratch[headLen+r.arrayLen(1) : len(scratch)-len(tail)] }
	// The answers made whole (errors, a few bytes each) are encoded
	// while sizing; the cluster's topics are sized by arithmetic.
	var fixed [][]byte
	size := len(buf) - 4 - r.arrayLen(0) + r.arrayLen(len(r.topics))
	for i := range r.topics {
		e := &r.topics[i]
		if e.info != nil {
			size += r.topicSize(e.info)
			continue
		}
		one.Topics[0] = *e.fixed
		scratch = one.AppendTo(scratch[:0])
		fixed = append(fixed, append([]byte(nil), topicBytes()...))
		size += len(fixed[len(fixed)-1])
	}
	binary.BigEndian.PutUint32(buf, uint32(size))
	buf = buf[:headEnd]
	if r.IsFlexible() {
		buf = kbin.AppendUvarint(buf, uint32(len(r.topics)+1))
	} else {
		buf = kbin.AppendInt32(buf, int32(len(r.topics)))
	}
	sent := 0
	for i := range r.topics {
		if e := &r.topics[i]; e.info != nil {
			r.topic(&one.Topics[0], e.info)
			scratch = one.AppendTo(scratch[:0])
			buf = append(buf, topicBytes()...)
		} else {
			buf = append(buf, fixed[0]...)
			fixed = fixed[1:]
		}
		if len(buf) >= writeChunk {
			if _, err := w.Write(buf); err != nil {
				return buf, fmt.Errorf("kafkaproto: writing metadata response: %w", err)
			}
			sent += len(buf)
			buf = buf[:0]
		}
	}
	buf = append(buf, tail...)
	if sent+len(buf)-4 != size {
		return buf, fmt.Errorf("kafkaproto: metadata response of %d bytes, sized %d", sent+len(buf)-4, size)
	}
	if _, err := w.Write(buf); err != nil {
		return buf, fmt.Errorf("kafkaproto: writing metadata response: %w", err)
	}
	return buf, nil
}
