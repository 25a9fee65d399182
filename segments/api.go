package segments

// CONTRACT STUB written by the lead: the server is coded against these exact
// signatures. The segments owner replaces the bodies (and may split the file);
// adding methods and fields is fine, changing these signatures is not without
// telling the lead.

import (
	"errors"
	"io"
	"log/slog"
	"time"
)

// Sentinel errors; callers match them with errors.Is.
var (
	ErrOffsetOutOfRange = errors.New("segments: offset out of range")
	ErrCorruptBatch     = errors.New("segments: corrupt record batch")
	ErrBatchTooLarge    = errors.New("segments: record batch larger than max.message.bytes")
	ErrClosed           = errors.New("segments: log closed")
)

// Config is a partition's log configuration, the segment-related topic configs.
type Config struct {
	SegmentBytes       int64  // segment.bytes, default 1 GiB
	SegmentMs          int64  // segment.ms, default 7 days
	RetentionMs        int64  // retention.ms, -1 = keep forever; default 7 days
	RetentionBytes     int64  // retention.bytes, -1 = unlimited (default)
	CleanupPolicy      string // "delete" (default), "compact", "compact,delete"
	MaxMessageBytes    int32  // max.message.bytes, default 1048588
	IndexIntervalBytes int32  // index.interval.bytes, default 4096
	FlushMessages      int64  // flush.messages: fsync after this many messages; 1 = fsync before acknowledging every append; default: never forced
	FlushMs            int64  // flush.ms: fsync when the oldest unflushed append is this old; default: never forced
	DeleteRetentionMs  int64  // delete.retention.ms, default 1 day
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config { panic("unimplemented") }

// FileCache bounds the open file descriptors shared by all logs of a process.
type FileCache struct{}

// NewFileCache returns a cache holding at most max open files.
func NewFileCache(max int) *FileCache { panic("unimplemented") }

// Options carries a log's dependencies.
type Options struct {
	FS     FS               // nil: the operating system's filesystem
	Files  *FileCache       // nil: a private cache
	Logger *slog.Logger     // nil: slog.Default()
	Now    func() time.Time // nil: time.Now
}

// FS is the small filesystem interface the package reaches the disk through.
type FS interface{}

// AppendInfo describes what an Append stored.
type AppendInfo struct {
	BaseOffset     int64
	LastOffset     int64
	MaxTimestamp   int64
	LogStartOffset int64
}

// Chunk is a byte range of whole record batches read from a log. It pins the
// file it points into until Close.
type Chunk interface {
	io.WriterTo // writes the bytes; uses sendfile when w is a socket
	Len() int
	Bytes() ([]byte, error)
	Close() error
}

// Log is one partition's log. All methods are safe for concurrent use.
type Log struct{}

// Open opens (recovering if needed) or creates the log in dir.
func Open(dir string, cfg Config, opts Options) (*Log, error) { panic("unimplemented") }

// Append validates one or more concatenated RecordBatch v2 and appends them
// atomically, assigning base offsets and the partition leader epoch in place.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	panic("unimplemented")
}

// Read returns whole batches starting with the one containing offset, at most
// maxBytes (but at least one batch when one exists), none whose base offset is
// >= maxOffset. offset == EndOffset yields an empty chunk; outside
// [StartOffset, EndOffset] it is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Chunk, error) {
	panic("unimplemented")
}

// OffsetForTimestamp returns the first offset whose timestamp is >= ts and
// that timestamp; ok is false when there is none.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	panic("unimplemented")
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= epoch
// and the offset where it ended.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64, error) { panic("unimplemented") }

// Truncate removes every record at offset >= to.
func (l *Log) Truncate(to int64) error { panic("unimplemented") }

// DeleteRecordsBefore advances the log start offset to offset.
func (l *Log) DeleteRecordsBefore(offset int64) error { panic("unimplemented") }

func (l *Log) StartOffset() int64 { panic("unimplemented") }
func (l *Log) EndOffset() int64   { panic("unimplemented") }

// Size is the bytes held on disk by the log's segments.
func (l *Log) Size() int64 { panic("unimplemented") }

// SetConfig applies a changed topic config.
func (l *Log) SetConfig(cfg Config) error { panic("unimplemented") }

// Maintain runs the time-driven work: time-based roll, flush.ms, retention
// and compaction. The owner calls it periodically from one goroutine.
func (l *Log) Maintain(now time.Time) error { panic("unimplemented") }

// Sync fsyncs everything appended so far.
func (l *Log) Sync() error { panic("unimplemented") }

// Close flushes, writes the recovery checkpoint and releases files.
func (l *Log) Close() error { panic("unimplemented") }

// Delete closes the log and removes its directory.
func (l *Log) Delete() error { panic("unimplemented") }
