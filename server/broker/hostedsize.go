package broker

// TopicSizeBytes is the bytes the segments of topic's partitions hosted
// here take, for listings. A partition not made since the start is read
// from one listing of its directory and left unmade: a page of the topic
// list used to make a Partition for every hosted replica of every listed
// topic (PartitionsOf), each kept until its topic leaves the broker, so one
// listing of a million-partition node made a million of them.
func (b *Broker) TopicSizeBytes(topic string) int64 {
	if b == nil { // a controller-only node hosts nothing
		return 0
	}
	var madeParts []*Partition
	var unmade []int32
	b.mu.RLock()
	if b.closed || b.img == nil {
		b.mu.RUnlock()
		return 0
	}
	t, ok := b.img.Topics.Lookup(topic)
	if !ok {
		b.mu.RUnlock()
		return 0
	}
	ht := b.topics[topic]
	for i, pm := range t.Partitions {
		if !containsID(pm.Replicas, b.id) {
			continue
		}
		if ht != nil {
			if p, ok := ht.parts[int32(i)]; ok {
				madeParts = append(madeParts, p)
				continue
			}
		}
		unmade = append(unmade, int32(i))
	}
	b.mu.RUnlock()
	// Sizes are read outside the lock (directory listings): a partition
	// made and written meanwhile is counted as it was at its listing.
	var size int64
	for _, p := range madeParts {
		size += p.SizeBytes()
	}
	for _, idx := range unmade {
		size += b.unmadeSize(topic, idx)
	}
	return size
}

// unmadeSize is the bytes of the segments of a partition not made since
// the start, from one listing of its directory (0 when it has none).
func (b *Broker) unmadeSize(topic string, idx int32) int64 {
	dir, err := b.partitionDir(topic, idx)
	if err != nil {
		return 0
	}
	lp, err := peekDir(dir)
	if err != nil {
		return 0
	}
	return lp.size
}

// HostedLog is one hosted partition's log as DescribeLogDirs reports it.
type HostedLog struct {
	Topic     string
	Partition int32
	Size      int64 // bytes of its segments
	OffsetLag int64 // how far its end is behind the high watermark
}

// HostedLogs lists every partition hosted here, in topic and index order,
// without making a Partition for those not made since the start: their
// size comes from a listing of their directory and their lag is 0 (a
// partition this broker follows is made when it starts following, so an
// unmade one is led here, and a leader's end is its high watermark or
// past it).
func (b *Broker) HostedLogs() []HostedLog {
	if b == nil {
		return nil
	}
	type hosted struct {
		log HostedLog
		p   *Partition // nil: not made
	}
	var all []hosted
	b.mu.RLock()
	if b.closed || b.img == nil {
		b.mu.RUnlock()
		return nil
	}
	for name, t := range b.img.Topics.All() {
		ht := b.topics[name]
		for i, pm := range t.Partitions {
			if !containsID(pm.Replicas, b.id) {
				continue
			}
			h := hosted{log: HostedLog{Topic: name, Partition: int32(i)}}
			if ht != nil {
				h.p = ht.parts[int32(i)]
			}
			all = append(all, h)
		}
	}
	b.mu.RUnlock()
	out := make([]HostedLog, len(all))
	for i, h := range all {
		out[i] = h.log
		if h.p != nil {
			out[i].Size = h.p.SizeBytes()
			if _, end, hwm, err := h.p.Offsets(); err == nil { // opens no empty log
				out[i].OffsetLag = max(hwm-end, 0)
			}
			continue
		}
		out[i].Size = b.unmadeSize(h.log.Topic, h.log.Partition)
	}
	return out
}
