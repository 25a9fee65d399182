package producerlog

import (
	"fmt"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// Log is what a rebuild reads of a partition's log (a *segments.Log).
type Log interface {
	StartOffset() int64
	EndOffset() int64
	OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error)
	Read(offset int64, maxBytes int, maxOffset int64) (segments.Chunk, error)
}

// scanChunk is how much of the log a scan reads at a time.
const scanChunk = 1 << 20

// Scan calls fn with every batch below end from the first one with a
// timestamp at or after since, and at or after from (0: the log start; a
// batch holding from is read whole).
// Batches are checked as they are read (recordbatch.Next: framing, CRC);
// a corrupt one ends the scan with its error.
func Scan(log Log, since time.Time, from, end int64, fn func(raw []byte, info recordbatch.Info)) error {
	off, _, ok, err := log.OffsetForTimestamp(since.UnixMilli())
	if err != nil || !ok {
		return err
	}
	for off = max(off, from, log.StartOffset()); off < end; {
		chunk, err := log.Read(off, scanChunk, end)
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		next := off
		for {
			info, ok, err := recordbatch.Next(data)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			fn(data[:info.Size], info)
			next = info.LastOffset + 1
			data = data[info.Size:]
		}
		if next <= off {
			break
		}
		off = next
	}
	return nil
}

// isControl reports whether the batch is a transaction marker.
func isControl(info recordbatch.Info) bool { return info.Attributes&recordbatch.AttrControl != 0 }
