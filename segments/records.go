package segments

import (
	"encoding/binary"
	"fmt"
)

// record is one decoded record of a batch; key and value alias the batch
// bytes. A nil value is a tombstone.
type record struct {
	offset    int64
	timestamp int64
	key       []byte
	value     []byte
	raw       []byte // the whole encoded record, length prefix included
}

// forEachRecord decodes the records of an uncompressed record section
// (the bytes after the batch header) of the batch h.
func forEachRecord(h batchHeader, data []byte, fn func(r record) bool) error {
	logAppendTime := h.attributes&0x8 != 0
	for i := int32(0); i < h.numRecords; i++ {
		r, n, err := decodeRecord(data)
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
		r.offset += h.baseOffset
		if logAppendTime {
			r.timestamp = h.maxTimestamp
		} else {
			r.timestamp += h.firstTimestamp
		}
		data = data[n:]
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// decodeRecord parses one record; offset and timestamp are the deltas.
func decodeRecord(b []byte) (record, int, error) {
	var r record
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, 0, fmt.Errorf("bad record length")
	}
	total := n + int(length)
	r.raw = b[:total]
	p := b[n:total]
	if len(p) < 1 {
		return r, 0, fmt.Errorf("short record")
	}
	p = p[1:] // attributes
	var ok bool
	if r.timestamp, p, ok = varint(p); !ok {
		return r, 0, fmt.Errorf("bad timestamp delta")
	}
	if r.offset, p, ok = varint(p); !ok {
		return r, 0, fmt.Errorf("bad offset delta")
	}
	if r.key, p, ok = varbytes(p); !ok {
		return r, 0, fmt.Errorf("bad key")
	}
	if r.value, _, ok = varbytes(p); !ok {
		return r, 0, fmt.Errorf("bad value")
	}
	return r, total, nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// varbytes reads a varint length and that many bytes; length -1 is nil.
func varbytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := varint(b)
	switch {
	case !ok || l < -1 || l > int64(len(b)):
		return nil, b, false
	case l == -1:
		return nil, b, true
	}
	return b[:l:l], b[l:], true
}
