package httpdoor

import "encoding/binary"

// murmur2 is the hash of Kafka's default partitioner (Utils.murmur2), so a
// keyed record lands on the same partition whether it came over HTTP or from
// a Kafka producer.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// keyPartition is Kafka's choice of partition for a keyed record.
func keyPartition(key []byte, partitions int32) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(partitions))
}
