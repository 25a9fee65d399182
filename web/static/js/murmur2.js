// Kafka's default key partitioner: murmur2 of the key bytes (seed 0x9747b28c),
// sign bit cleared, modulo the partition count. HTTP produce without a
// partition uses the same function, so a key always lives in one partition and
// "find by key" needs to search only that one.

export function murmur2(bytes) {
  const m = 0x5bd1e995;
  const len = bytes.length;
  let h = (0x9747b28c ^ len) | 0;
  const n4 = len & ~3;
  for (let i = 0; i < n4; i += 4) {
    let k = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  switch (len & 3) {
    case 3: h ^= bytes[n4 + 2] << 16; // falls through
    case 2: h ^= bytes[n4 + 1] << 8; // falls through
    case 1: h ^= bytes[n4]; h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h >>> 0;
}

// partitionFor returns the partition Kafka (and runnel) picks for a key given
// as a string (UTF-8 encoded) or a Uint8Array.
export function partitionFor(key, numPartitions) {
  const bytes = typeof key === 'string' ? new TextEncoder().encode(key) : key;
  return (murmur2(bytes) & 0x7fffffff) % numPartitions;
}
