package raftfsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// A topic's binary stored form, written once the cluster's command version
// is 2 (older nodes read JSON only, and snapshots carry stored values to
// them). A leader move rewrites the whole topic's value; in JSON that was
// about 100 bytes per partition (1 MB for a topic of 10,000), which badger
// then flushed and compacted, and which a restart decoded by reflection.
// Here a partition takes about 12 bytes. Integers are varints (zigzag for
// signed ones); a list is uvarint(n+1), 0 meaning nil, so that a decoded
// topic equals the encoded one, nil lists and maps included (the digest
// tells null from []):
//
//	0x00 | format 1 | ID [16] | uvarint len(name) | name
//	configs: uvarint(n+1) | n × (uvarint len(key) | key | uvarint len(value) | value), keys sorted
//	partitions: uvarint(n+1) | n × (varint leader | varint leader epoch |
//	    varint partition epoch | replicas | isr | adding | removing), each a list of varints
const (
	topicBinaryMarker = 0x00
	topicBinaryFormat = 1
	// maxStoredReplicas bounds one stored replica list: a target and the
	// replicas a reassignment removes.
	maxStoredReplicas = 2 * HardMaxReplicationFactor
	// idChunk is the size of the arrays decoded replica lists share.
	idChunk = 4096
)

func appendTopicBinary(b []byte, t *Topic) []byte {
	b = append(b, topicBinaryMarker, topicBinaryFormat)
	b = append(b, t.ID[:]...)
	b = appendString(b, t.Name)
	if t.Configs == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(t.Configs))+1)
		for _, k := range sortedKeys(t.Configs) {
			b = appendString(appendString(b, k), t.Configs[k])
		}
	}
	if t.Partitions == nil {
		return append(b, 0)
	}
	b = slices.Grow(b, len(t.Partitions)*14)
	b = binary.AppendUvarint(b, uint64(len(t.Partitions))+1)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		b = appendVarint32(b, p.Leader)
		b = appendVarint32(b, p.LeaderEpoch)
		b = appendVarint32(b, p.PartitionEpoch)
		b = appendIDs(b, p.Replicas)
		b = appendIDs(b, p.ISR)
		b = appendIDs(b, p.AddingReplicas())
		b = appendIDs(b, p.RemovingReplicas())
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeTopic reads a stored topic in either form.
func decodeTopic(v []byte) (*Topic, error) {
	if len(v) == 0 || v[0] != topicBinaryMarker {
		var t Topic
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, err
		}
		return &t, nil
	}
	return decodeTopicBinary(v)
}

func decodeTopicBinary(v []byte) (*Topic, error) {
	if len(v) < 18 || v[1] != topicBinaryFormat {
		return nil, fmt.Errorf("binary topic: bad header")
	}
	t := &Topic{}
	copy(t.ID[:], v[2:18])
	r := &reader{b: v[18:]}
	t.Name = string(r.bytes(maxChunk))
	if n := r.uvarint(); n > 0 && r.err == nil {
		n--
		if n > uint64(len(r.b)/2) {
			r.fail("%d configs", n)
		} else {
			t.Configs = make(map[string]string, n)
			for range n {
				k := string(r.bytes(maxChunk))
				t.Configs[k] = string(r.bytes(maxChunk))
			}
		}
	}
	if n := r.uvarint(); n > 0 && r.err == nil {
		n--
		if n > uint64(len(r.b)/7) {
			r.fail("%d partitions", n)
		} else {
			t.Partitions = make([]Partition, n)
			// The replica lists share backing arrays of idChunk ids (a
			// list is replaced, never modified, once published, and each
			// is clipped so that an append copies): two small allocations
			// per partition would be most of a load's garbage.
			var ids []int32
			for i := range t.Partitions {
				p := &t.Partitions[i]
				p.Leader = r.int32()
				p.LeaderEpoch = r.int32()
				p.PartitionEpoch = r.int32()
				p.Replicas, ids = r.idsInto(ids)
				p.ISR, ids = r.idsInto(ids)
				var adding, removing []int32
				adding, ids = r.idsInto(ids)
				removing, ids = r.idsInto(ids)
				p.Reassignment = newReassignment(adding, removing)
			}
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the topic", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("binary topic: %v", r.err)
	}
	return t, nil
}

// idsInto reads a list of int32 into the tail of buf (a nil list for 0,
// an empty one that is not nil for a length of 0).
func (r *reader) idsInto(buf []int32) ([]int32, []int32) {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil, buf
	}
	n--
	if n > maxStoredReplicas || n > uint64(len(r.b)) {
		r.fail("list of %d", n)
		return nil, buf
	}
	if n == 0 {
		return []int32{}, buf
	}
	if cap(buf)-len(buf) < int(n) {
		// Every id left takes at least a byte: a chunk never outgrows
		// what the value can still hold (a topic of one partition keeps
		// a few ids, not idChunk of them).
		buf = make([]int32, 0, max(int(n), min(idChunk, len(r.b))))
	}
	start := len(buf)
	for range n {
		buf = append(buf, r.int32())
	}
	return buf[start:len(buf):len(buf)], buf
}
