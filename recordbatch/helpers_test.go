package recordbatch

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rec is a record for building test batches; a nil value is a tombstone.
type rec struct {
	key, value []byte
	ts         int64
	headers    []kmsg.Header
}

// buildBatch encodes an uncompressed producer RecordBatch v2 (base offset 0)
// with a valid CRC-32C, through kmsg's whole-batch encoder: the reference
// the package's own Build is checked against (TestBuildMatchesKmsg), and
// the other packages' tests build with Build.
func buildBatch(recs []rec) []byte {
	first, maxTs := recs[0].ts, recs[0].ts
	for _, r := range recs {
		first, maxTs = min(first, r.ts), max(maxTs, r.ts)
	}
	var body []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		enc := kr.AppendTo(nil)[1:] // drop the placeholder length varint 0
		body = binary.AppendVarint(body, int64(len(enc)))
		body = append(body, enc...)
	}
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body,
	}
	b.Length = int32(HeaderLen - PrefixLen + len(body))
	out := b.AppendTo(nil)
	SetCRC(out)
	return out
}

// valueBatch builds n records of size bytes each with timestamps ts, ts+1...
func valueBatch(n, size int, ts int64) []byte {
	recs := make([]rec, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = rec{key: []byte{byte(i)}, value: v, ts: ts + int64(i)}
	}
	return buildBatch(recs)
}

// withCodec recompresses the records of the uncompressed batch b with codec
// and fixes length, attributes and CRC, as a producer would have built it.
func withCodec(t testing.TB, b []byte, codec int, xerialFraming bool) []byte {
	t.Helper()
	body, err := Compress(codec, b[HeaderLen:], xerialFraming)
	if err != nil {
		t.Fatal(err)
	}
	return reframe(b[:HeaderLen], codec, body)
}

// reframe puts body after a copy of header with codec in the attributes and
// a recomputed length and CRC: garbage bodies pass every header check.
func reframe(header []byte, codec int, body []byte) []byte {
	out := append(bytes.Clone(header[:HeaderLen]), body...)
	attrs := binary.BigEndian.Uint16(out[AttrAt:])&^7 | uint16(codec)
	binary.BigEndian.PutUint16(out[AttrAt:], attrs)
	binary.BigEndian.PutUint32(out[LengthAt:], uint32(len(out)-PrefixLen))
	SetCRC(out)
	return out
}

// bombBatch is one batch of n records with values of size zero bytes each,
// compressed with codec: tiny on the wire, large inflated.
func bombBatch(t testing.TB, codec, n, size int) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: []byte("k"), value: make([]byte, size), ts: 1}
	}
	return withCodec(t, buildBatch(recs), codec, false)
}

// seedBatches returns valid and damaged batch byte strings for fuzz corpora.
func seedBatches() [][]byte {
	a := valueBatch(3, 20, 100)
	b := buildBatch([]rec{{key: []byte("k"), value: nil, ts: 5}})
	flipped := bytes.Clone(a)
	flipped[len(flipped)-1] ^= 0xff
	return [][]byte{a, b, append(bytes.Clone(a), b...), a[:30], flipped, append(bytes.Clone(a), 1, 2, 3)}
}
