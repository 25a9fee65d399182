package kafkaproto

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// inlineChunk is the size below which a chunk is copied into the response
// buffer instead of being sent with its own (sendfile) write.
const inlineChunk = 8 << 10

// fetchReply is a Fetch response whose record batches are still chunks of
// the log. Its embedded FetchResponse holds the top-level fields (its
// Topics stay nil); topics holds the answer's partitions in a compact form
// of their own: a follower's fetch after a kill -9 at 300,000 partitions
// answers 100,000 or more, and as kmsg's FetchResponseTopicPartition (~200
// bytes, grown by append) they were 343 MB of the 2.26 GB a survivor
// allocated in 40 s (issue 19). It is used by one goroutine and must be
// closed.
type fetchReply struct {
	*kmsg.FetchResponse
	topics []fetchTopic
}

// fetchTopic is a topic of a fetchReply.
type fetchTopic struct {
	name  string
	id    [16]byte // v13+: the id the client named
	parts []fetchPart
}

// fetchPart is a partition of a fetchReply: what kmsg's
// FetchResponseTopicPartition would hold but PreferredReadReplica (always
// -1: this broker names no other replica to read from, KIP-392), with its
// records still a chunk of the log.
type fetchPart struct {
	partition         int32
	errCode           int16
	hw, lso, logStart int64
	aborted           []AbortedTransaction // read_committed: non-nil, maybe empty; nil: null
	records           Chunk                // nil: none
}

// reset closes and forgets every chunk.
func (fr *fetchReply) reset() {
	for i := range fr.topics {
		for j := range fr.topics[i].parts {
			p := &fr.topics[i].parts[j]
			closeChunk(p.records)
			p.records = nil
		}
	}
}

func (fr *fetchReply) close() { fr.reset() }

// AppendTo encodes the response with kmsg, reading the chunks into memory.
// The connection uses writeTo instead; this is the reference it must match.
func (fr *fetchReply) AppendTo(dst []byte) []byte {
	cp := *fr.FetchResponse
	cp.Topics = make([]kmsg.FetchResponseTopic, len(fr.topics))
	for i, t := range fr.topics {
		rt := &cp.Topics[i]
		*rt = kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.parts))
		for j, p := range t.parts {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.partition, p.errCode
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p.hw, p.lso, p.logStart
			if p.aborted != nil {
				rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(p.aborted))
				for k, a := range p.aborted {
					rp.AbortedTransactions[k] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
				}
			}
			rp.RecordBatches = []byte{}
			if p.records != nil {
				if b, err := p.records.Bytes(); err == nil {
					rp.RecordBatches = b
				}
			}
		}
	}
	return cp.AppendTo(dst)
}

// writeTo writes prefix (a 4-byte size placeholder and the response header)
// and the response to w, sending large chunks with their own WriteTo so a
// file-backed chunk goes out with sendfile. The rest goes through one
// buffer, written every writeChunk bytes: buffered whole, the answer of a
// follower's fetch of 100,000 partitions with a record each (~10 MB) grew
// one buffer by doubling. It returns the buffer it used, for reuse.
func (fr *fetchReply) writeTo(w io.Writer, prefix []byte) ([]byte, error) {
	size := len(prefix) - 4 + fr.encodedSize()
	binary.BigEndian.PutUint32(prefix, uint32(size))
	var err error
	buf := fr.appendHead(prefix)
	for i := range fr.topics {
		t := &fr.topics[i]
		buf = fr.appendTopicHead(buf, t)
		for j := range t.parts {
			p := &t.parts[j]
			n := 0
			if p.records != nil {
				n = p.records.Len()
			}
			buf = fr.appendPartitionHead(buf, p, n)
			if n > 0 {
				if buf, err = fr.appendChunk(w, buf, p.records); err != nil {
					return buf, err
				}
			}
			buf = fr.appendTags(buf) // partition tags
			if len(buf) >= writeChunk {
				if _, err := w.Write(buf); err != nil {
					return buf[:0], fmt.Errorf("kafkaproto: writing fetch response: %w", err)
				}
				buf = buf[:0]
			}
		}
		buf = fr.appendTags(buf) // topic tags
	}
	buf = fr.appendTags(buf) // response tags
	if _, err := w.Write(buf); err != nil {
		return buf, fmt.Errorf("kafkaproto: writing fetch response: %w", err)
	}
	return buf, nil
}

// appendChunk adds a chunk's bytes: copied into buf when small, otherwise
// written after flushing buf.
func (fr *fetchReply) appendChunk(w io.Writer, buf []byte, c Chunk) ([]byte, error) {
	if c.Len() <= inlineChunk {
		b, err := c.Bytes()
		if err != nil {
			return buf, fmt.Errorf("kafkaproto: reading records: %w", err)
		}
		if len(b) != c.Len() {
			return buf, fmt.Errorf("kafkaproto: chunk of %d bytes read as %d", c.Len(), len(b))
		}
		return append(buf, b...), nil
	}
	if _, err := w.Write(buf); err != nil {
		return buf[:0], fmt.Errorf("kafkaproto: writing fetch response: %w", err)
	}
	n, err := c.WriteTo(w)
	if err == nil && n != int64(c.Len()) {
		err = fmt.Errorf("kafkaproto: chunk of %d bytes wrote %d", c.Len(), n)
	}
	if err != nil {
		return buf[:0], fmt.Errorf("kafkaproto: writing records: %w", err)
	}
	return buf[:0], nil
}

func (fr *fetchReply) flexible() bool { return fr.Version >= 12 }

// The append helpers below encode FetchResponse v4-v17 field by field, in
// the order of the Kafka protocol definition; the tests compare their
// output with kmsg's AppendTo byte for byte.

func (fr *fetchReply) appendHead(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(fr.ThrottleMillis))
	if fr.Version >= 7 {
		b = binary.BigEndian.AppendUint16(b, uint16(fr.ErrorCode))
		b = binary.BigEndian.AppendUint32(b, uint32(fr.SessionID))
	}
	return fr.appendArrayLen(b, len(fr.topics))
}

func (fr *fetchReply) appendTopicHead(b []byte, t *fetchTopic) []byte {
	switch {
	case fr.Version >= 13: // topic ids (KIP-516) instead of names
		b = append(b, t.id[:]...)
		return fr.appendArrayLen(b, len(t.parts))
	case fr.flexible():
		b = binary.AppendUvarint(b, uint64(len(t.name))+1)
	default:
		b = binary.BigEndian.AppendUint16(b, uint16(len(t.name)))
	}
	b = append(b, t.name...)
	return fr.appendArrayLen(b, len(t.parts))
}

// appendPartitionHead encodes a partition up to and including the length
// of its records, which are n bytes.
func (fr *fetchReply) appendPartitionHead(b []byte, p *fetchPart, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.partition))
	b = binary.BigEndian.AppendUint16(b, uint16(p.errCode))
	b = binary.BigEndian.AppendUint64(b, uint64(p.hw))
	b = binary.BigEndian.AppendUint64(b, uint64(p.lso))
	if fr.Version >= 5 {
		b = binary.BigEndian.AppendUint64(b, uint64(p.logStart))
	}
	// Aborted transactions (read_committed): null unless set.
	switch {
	case p.aborted == nil && fr.flexible():
		b = append(b, 0)
	case p.aborted == nil:
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	default:
		b = fr.appendArrayLen(b, len(p.aborted))
		for _, a := range p.aborted {
			b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
			b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
			b = fr.appendTags(b)
		}
	}
	if fr.Version >= 11 {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff) // preferred read replica: none
	}
	if fr.flexible() {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func (fr *fetchReply) appendArrayLen(b []byte, n int) []byte {
	if fr.flexible() {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// appendTags adds an empty tagged-field section in flexible versions.
func (fr *fetchReply) appendTags(b []byte) []byte {
	if fr.flexible() {
		return append(b, 0)
	}
	return b
}

// encodedSize is the length of the encoded response body.
func (fr *fetchReply) encodedSize() int {
	var scratch [64]byte
	n := len(fr.appendHead(scratch[:0]))
	for i := range fr.topics {
		t := &fr.topics[i]
		n += len(fr.appendTopicHead(scratch[:0], t))
		for j := range t.parts {
			p := &t.parts[j]
			records := 0
			if p.records != nil {
				records = p.records.Len()
			}
			n += len(fr.appendPartitionHead(scratch[:0], p, records)) + records
			n += len(fr.appendTags(scratch[:0]))
		}
		n += len(fr.appendTags(scratch[:0]))
	}
	return n + len(fr.appendTags(scratch[:0]))
}
