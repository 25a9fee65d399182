package groups

import (
	"context"
	"log/slog"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
)

// Config holds what the coordinator reads from the node's configuration.
type Config struct {
	NodeID int32
	// OffsetsPartitions is the partition count of __consumer_offsets when
	// the coordinator creates it (0: 3).
	OffsetsPartitions int32
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (0: Kafka's defaults, 6 s and 30 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	Logger                               *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Backend is what the coordinator needs from the broker it runs on. Every
// method is safe for concurrent use. The coordinator calls it without
// holding a group's lock except Append (see the package doc's lock order).
type Backend interface {
	// Image returns the current metadata image and a channel closed when a
	// newer one is published.
	Image() (*raftfsm.Image, <-chan struct{})
	// CreateTopic creates a topic through the controller; an error wrapping
	// raftfsm.ErrTopicExists when it exists.
	CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string) error
	// Append appends records to partition p of __consumer_offsets, led by
	// this broker, as one batch (all or none) with acks=all: it returns once
	// the in-sync replicas hold it, or when ctx ends. Errors wrap
	// kafkaproto.ErrNotCoordinator (the partition moved, its disk failed) or
	// kafkaproto.ErrCoordinatorNotAvailable (too few replicas, timeout)
	// where Kafka's coordinator answers those.
	Append(ctx context.Context, p int32, recs []Record) error
	// OffsetsLog returns partition p of __consumer_offsets when this broker
	// holds it.
	OffsetsLog(p int32) (Log, error)
	// Read reads decoded records of any partition wherever its leader is
	// (forwarding one hop), read_committed unless uncommitted; errors are
	// the api package's sentinels.
	Read(ctx context.Context, t TopicPartition, offset int64, maxRecords, maxBytes int, uncommitted bool) (api.ConsumeResult, error)
	// OffsetForTime is the first offset of t whose record is at or after
	// ts (end when there is none).
	OffsetForTime(ctx context.Context, t TopicPartition, ts, end int64) (int64, error)

	// SetGroupLag records a sample of a group's lag per topic;
	// ForgetGroupLag drops a group's; Consumed counts records an HTTP
	// member's poll read.
	SetGroupLag(group string, byTopic map[string]int64)
	ForgetGroupLag(group string)
	Consumed(topic string, records, bytes int)
}

// Log is one offsets partition as the loader reads it. Safe for concurrent
// use.
type Log interface {
	StartOffset() int64
	EndOffset() int64
	HighWatermark() int64
	// Changed returns a channel closed at the partition's next change
	// (append, high watermark move).
	Changed() <-chan struct{}
	// ReadRecords decodes records at or after offset below the high
	// watermark, up to maxRecords and maxBytes. A batch that cannot be
	// decoded ends the read after the records before it (next is its
	// offset), with an error when it comes first.
	ReadRecords(offset int64, maxRecords, maxBytes int) (recs []Record, next, hwm int64, err error)
	// BatchEnd returns the offset after the batch holding offset, read from
	// its header alone.
	BatchEnd(offset int64) (int64, error)
}

// Record is one record of __consumer_offsets: Value nil is a tombstone.
// Offset is set on records read, ignored on appends.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
}

// TopicPartition names a partition (the Kafka door's type).
type TopicPartition = kafkaproto.TopicPartition
