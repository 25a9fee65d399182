package segments

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// Sentinel errors; callers match them with errors.Is. A batch refused for
// its bytes wraps recordbatch's errors (ErrCorruptBatch, ErrBatchTooLarge,
// ErrInvalidRecord, ErrInflatedTooLarge).
var (
	ErrOffsetOutOfRange = errors.New("segments: offset out of range")
	ErrClosed           = errors.New("segments: log closed")
	// ErrStorage wraps the sticky write or fsync error of a failed log
	// (disk full, I/O error): it refuses changes until Recover or a reopen.
	ErrStorage = errors.New("segments: storage error")
)

// Config is a partition's log configuration, the segment-related topic configs.
// Start from DefaultConfig and override: zero values of SegmentBytes,
// SegmentMs, MaxMessageBytes and CleanupPolicy mean the default, while a zero
// RetentionMs, RetentionBytes or DeleteRetentionMs means zero, as in Kafka.
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
	// MaxInflatedBytes bounds what the records of one appended batch may
	// decompress to (a process-wide limit, not a topic config); 0 means
	// DefaultMaxInflatedBytes.
	MaxInflatedBytes int64
	// RescanBytes bounds what CloseAll leaves for the log's next open to
	// rescan instead of writing its clean-close files (a process-wide
	// setting, not a topic config): a log whose segments from the saved
	// recovery point on hold at most this many bytes is made durable by
	// the filesystem's sync alone, and its next open recovers it from
	// that point as after a crash. Maintain writes no recovery-point
	// checkpoint for such a log either. 0 means DefaultRescanBytes;
	// negative, every written log gets a clean close and its checkpoints.
	RescanBytes int64
	// FramingOnly turns record validation off on Append, back to what it
	// was before it existed (uncompressed records framed, compressed ones
	// not inflated): the baseline of the produce benchmark, never for
	// serving clients.
	FramingOnly bool
}

// Kafka's defaults.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	DefaultRetentionMs        = 7 * 24 * 60 * 60 * 1000
	DefaultMaxMessageBytes    = 1048588
	DefaultIndexIntervalBytes = 4096
	DefaultDeleteRetentionMs  = 24 * 60 * 60 * 1000
	// DefaultMaxInflatedBytes: 32 MiB, 32x a default max.message.bytes
	// batch, well above what real payloads compress by.
	DefaultMaxInflatedBytes = 32 << 20
	// DefaultRescanBytes: 256 KiB, scanned (CRCs checked) in well under
	// a millisecond from the page cache, and about one from a cold SSD,
	// where a clean close's four small files cost ~2 ms a log on ext4.
	DefaultRescanBytes = 256 << 10
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       DefaultSegmentBytes,
		SegmentMs:          DefaultSegmentMs,
		RetentionMs:        DefaultRetentionMs,
		RetentionBytes:     -1,
		CleanupPolicy:      "delete",
		MaxMessageBytes:    DefaultMaxMessageBytes,
		IndexIntervalBytes: DefaultIndexIntervalBytes,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		DeleteRetentionMs:  DefaultDeleteRetentionMs,
		MaxInflatedBytes:   DefaultMaxInflatedBytes,
		RescanBytes:        DefaultRescanBytes,
	}
}

// normalized fills defaults for fields whose zero value is not meaningful and
// rejects values the log cannot work with.
func (c Config) normalized() (Config, error) {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes < recordbatch.HeaderLen {
		return c, fmt.Errorf("segments: segment.bytes %d is below the %d-byte batch header", c.SegmentBytes, recordbatch.HeaderLen)
	}
	if c.SegmentBytes > math.MaxUint32 {
		// Index positions are 32-bit.
		c.SegmentBytes = math.MaxUint32
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxInflatedBytes <= 0 {
		c.MaxInflatedBytes = DefaultMaxInflatedBytes
	}
	if c.RescanBytes == 0 {
		c.RescanBytes = DefaultRescanBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = math.MaxInt64
	}
	if c.FlushMs <= 0 {
		c.FlushMs = math.MaxInt64
	}
	if c.CleanupPolicy == "" {
		c.CleanupPolicy = "delete"
	}
	for _, p := range strings.Split(c.CleanupPolicy, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return c, fmt.Errorf("segments: unknown cleanup.policy %q", c.CleanupPolicy)
		}
	}
	return c, nil
}

func (c Config) compact() bool   { return strings.Contains(c.CleanupPolicy, "compact") }
func (c Config) deleteOld() bool { return strings.Contains(c.CleanupPolicy, "delete") }

// Options carries a log's dependencies.
type Options struct {
	FS     vfs.FS           // nil: the operating system's filesystem
	Files  *FileCache       // nil: a private cache
	Tails  *TailCache       // nil: no in-memory tail (tail.go)
	Logger *slog.Logger     // nil: slog.Default()
	Now    func() time.Time // nil: time.Now
	// OnFail, if set, is called each time the log's sticky error is set
	// (Err turns non-nil), whichever operation failed, a background
	// flush of a sealed segment included: its owner learns of a failure
	// without asking every log for Err. It runs with the log's lock held:
	// it must not call the log, nor block.
	OnFail func()
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.OSFS()
	}
	if o.Files == nil {
		o.Files = NewFileCache(8)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// AppendInfo describes what an Append stored.
type AppendInfo struct {
	BaseOffset     int64
	LastOffset     int64
	MaxTimestamp   int64
	LogStartOffset int64
}
