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
// the log. Its embedded FetchResponse holds everything but RecordBatches;
// chunks[i][j] holds Topics[i].Partitions[j]'s records (nil: none). It is
// used by one goroutine and must be closed.
type fetchReply struct {
	*kmsg.FetchResponse
	chunks [][]Chunk
}

// reset closes and forgets every chunk.
func (fr *fetchReply) reset() {
	for _, cs := range fr.chunks {
		for j, c := range cs {
			closeChunk(c)
			cs[j] = nil
		}
	}
}

func (fr *fetchReply) close() { fr.reset() }

// AppendTo encodes the response with kmsg, reading the chunks into memory.
// The connection uses writeTo instead; this is the reference it must match.
func (fr *fetchReply) AppendTo(dst []byte) []byte {
	cp := *fr.FetchResponse
	cp.Topics = make([]kmsg.FetchResponseTopic, len(fr.Topics))
	for i, t := range fr.Topics {
		cp.Topics[i] = t
		cp.Topics[i].Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			p.RecordBatches = []byte{}
			if c := fr.chunks[i][j]; c != nil {
				b, err := c.Bytes()
				if err == nil {
					p.RecordBatches = b
				}
			}
			cp.Topics[i].Partitions[j] = p
		}
	}
	return cp.AppendTo(dst)
}

// writeTo writes prefix (a 4-byte size placeholder and the response header)
// and the response to w, sending large chunks with their own WriteTo so a
// file-backed chunk goes out with sendfile. It returns the buffer it used,
// for reuse.
func (fr *fetchReply) writeTo(w io.Writer, prefix []byte) ([]byte, error) {
	size := len(prefix) - 4 + fr.encodedSize()
	binary.BigEndian.PutUint32(prefix, uint32(size))
	var err error
	buf := fr.appendHead(prefix)
	for i := range fr.Topics {
		t := &fr.Topics[i]
		buf = fr.appendTopicHead(buf, t)
		for j := range t.Partitions {
			c := fr.chunks[i][j]
			n := 0
			if c != nil {
				n = c.Len()
			}
			buf = fr.appendPartitionHead(buf, &t.Partitions[j], n)
			if n > 0 {
				if buf, err = fr.appendChunk(w, buf, c); err != nil {
					return buf, err
				}
			}
			buf = fr.appendTags(buf) // partition tags
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
	return fr.appendArrayLen(b, len(fr.Topics))
}

func (fr *fetchReply) appendTopicHead(b []byte, t *kmsg.FetchResponseTopic) []byte {
	switch {
	case fr.Version >= 13: // topic ids (KIP-516) instead of names
		b = append(b, t.TopicID[:]...)
		return fr.appendArrayLen(b, len(t.Partitions))
	case fr.flexible():
		b = binary.AppendUvarint(b, uint64(len(t.Topic))+1)
	default:
		b = binary.BigEndian.AppendUint16(b, uint16(len(t.Topic)))
	}
	b = append(b, t.Topic...)
	return fr.appendArrayLen(b, len(t.Partitions))
}

// appendPartitionHead encodes a partition up to and including the length
// of its records, which are n bytes.
func (fr *fetchReply) appendPartitionHead(b []byte, p *kmsg.FetchResponseTopicPartition, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
	b = binary.BigEndian.AppendUint64(b, uint64(p.HighWatermark))
	b = binary.BigEndian.AppendUint64(b, uint64(p.LastStableOffset))
	if fr.Version >= 5 {
		b = binary.BigEndian.AppendUint64(b, uint64(p.LogStartOffset))
	}
	// Aborted transactions (read_committed): null unless set.
	switch {
	case p.AbortedTransactions == nil && fr.flexible():
		b = append(b, 0)
	case p.AbortedTransactions == nil:
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	default:
		b = fr.appendArrayLen(b, len(p.AbortedTransactions))
		for _, a := range p.AbortedTransactions {
			b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
			b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
			b = fr.appendTags(b)
		}
	}
	if fr.Version >= 11 {
		b = binary.BigEndian.AppendUint32(b, uint32(p.PreferredReadReplica))
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
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += len(fr.appendTopicHead(scratch[:0], t))
		for j := range t.Partitions {
			records := 0
			if c := fr.chunks[i][j]; c != nil {
				records = c.Len()
			}
			n += len(fr.appendPartitionHead(scratch[:0], &t.Partitions[j], records)) + records
			n += len(fr.appendTags(scratch[:0]))
		}
		n += len(fr.appendTags(scratch[:0]))
	}
	return n + len(fr.appendTags(scratch[:0]))
}
