package segments

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments/vfs"
)

// Chunk is a byte range of whole record batches read from a log. One read
// from a segment file pins the file until Close; one answered by the log's
// in-memory tail (Options.Tails) holds a copy of the bytes and no file.
// A Chunk is used by one goroutine at a time. Truncate cuts a segment file
// in place: a file chunk over the bytes cut reads short, or, once appends
// after the cut wrote there again, their bytes, where a tail's chunk keeps
// the bytes it was read with (the broker reads below the high watermark,
// which followers truncate above).
type Chunk interface {
	io.WriterTo // writes the bytes; uses sendfile when w is a socket
	Len() int
	Bytes() ([]byte, error)
	Close() error
}

// FileRange is implemented by chunks backed by a file: the open file and the
// byte range, for callers doing their own zero-copy I/O. The file stays valid
// until the chunk is closed.
type FileRange interface {
	FileRange() (f vfs.File, offset, length int64)
}

// Read returns whole batches starting with the one containing offset, at most
// maxBytes (but at least one batch when one exists), none whose base offset is
// >= maxOffset (a negative maxOffset means no bound). offset == EndOffset
// yields an empty chunk; outside [StartOffset, EndOffset] it is
// ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Chunk, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if offset < l.start || offset > l.end {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.start, l.end)
	}
	if c, ok := l.readTailLocked(offset, maxBytes, maxOffset); ok {
		return c, nil
	}
	for i := l.segmentForLocked(offset); i < len(l.segs) && offset < l.end; i++ {
		s := l.segs[i]
		c, ok, err := l.readSegmentLocked(s, offset, maxBytes, maxOffset)
		if err != nil || ok {
			return c, err
		}
	}
	return emptyChunk{}, nil
}

// readSegmentLocked reads from s; ok is false when s holds no batch at or
// past offset (a compacted gap), so the caller goes on to the next segment.
func (l *Log) readSegmentLocked(s *segment, offset int64, maxBytes int, maxOffset int64) (Chunk, bool, error) {
	if err := l.loadLocked(s); err != nil {
		return nil, false, err
	}
	cf, err := l.files.acquire(l.fs, l.segPathLocked(s))
	if err != nil {
		return nil, false, fmt.Errorf("segments: read: %w", err)
	}
	pos, end, h, ok, err := s.findRange(cf.f, offset, maxBytes, maxOffset)
	if errors.Is(err, errBadIndex) {
		if err = l.rebuildBadIndexLocked(s, cf.f, err); err == nil {
			pos, end, h, ok, err = s.findRange(cf.f, offset, maxBytes, maxOffset)
		}
	}
	if err == nil && ok && maxOffset >= 0 && h.BaseOffset >= maxOffset {
		l.files.release(cf)
		return emptyChunk{}, true, nil
	}
	if err != nil || !ok {
		l.files.release(cf)
		if err != nil {
			err = fmt.Errorf("segments: read %s at %d: %w", s.path(l.dir), offset, err)
		}
		return nil, false, err
	}
	return &fileChunk{files: l.files, cf: cf, off: pos, n: end - pos}, true, nil
}

// findRange returns the run of whole batches Read answers from s: the
// position of the batch holding offset (h, its header; ok is false when
// none is at or past offset) and the end of the run; when h starts at or
// past maxOffset the end is not computed.
func (s *segment) findRange(f vfs.File, offset int64, maxBytes int, maxOffset int64) (pos, end int64, h recordbatch.Header, ok bool, err error) {
	pos, h, ok, err = s.findBatch(f, offset)
	if err != nil || !ok || (maxOffset >= 0 && h.BaseOffset >= maxOffset) {
		return pos, 0, h, ok, err
	}
	end, err = s.rangeEnd(f, pos, h, maxBytes, maxOffset)
	return pos, end, h, ok, err
}

type emptyChunk struct{}

func (emptyChunk) WriteTo(io.Writer) (int64, error) { return 0, nil }
func (emptyChunk) Len() int                         { return 0 }
func (emptyChunk) Bytes() ([]byte, error)           { return nil, nil }
func (emptyChunk) Close() error                     { return nil }

// fileChunk is a pinned range of a segment file.
type fileChunk struct {
	files *FileCache
	cf    *cachedFile
	off   int64
	n     int64
	once  sync.Once
}

func (c *fileChunk) Len() int { return int(c.n) }

func (c *fileChunk) FileRange() (vfs.File, int64, int64) { return c.cf.f, c.off, c.n }

func (c *fileChunk) Bytes() ([]byte, error) {
	b := make([]byte, c.n)
	if _, err := c.cf.f.ReadAt(b, c.off); err != nil {
		return nil, fmt.Errorf("segments: read chunk: %w", err)
	}
	return b, nil
}

func (c *fileChunk) Close() error {
	c.once.Do(func() { c.files.release(c.cf) })
	return nil
}

// WriteTo writes the range to w: with sendfile(2) from an explicit file
// offset when w is a socket and the file is an OS file, else by copying.
func (c *fileChunk) WriteTo(w io.Writer) (int64, error) {
	if dst, ok := w.(interface {
		net.Conn
		syscall.Conn
	}); ok {
		if src, ok := c.cf.f.(syscall.Conn); ok {
			n, handled, err := sendfile(dst, src, c.off, c.n)
			if handled {
				return n, err
			}
		}
	}
	n, err := io.Copy(w, io.NewSectionReader(c.cf.f, c.off, c.n))
	if err == nil && n < c.n {
		err = fmt.Errorf("segments: chunk cut short (truncated under it): %w", io.ErrUnexpectedEOF)
	}
	return n, err
}
