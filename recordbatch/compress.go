package recordbatch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs of the batch attributes' low three bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// maxDecompressed bounds one record the log decodes from a stored batch
// (compaction, timestamp search).
const maxDecompressed = 256 << 20

// zstdMaxWindow bounds the history a zstd frame may ask the decoder to
// keep: levels up to 19 use at most 8 MiB.
const zstdMaxWindow = 32 << 20

// zstdWholeFrameMax is the largest declared frame content size decoded in
// one call instead of streamed.
const zstdWholeFrameMax = 1 << 20

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Decompressors are pooled: creating one (zstd above all) costs more than
// decoding a small batch. The pools are caches with no meaning of their own,
// the one kind of package-level state this package keeps.
var (
	gzipPool sync.Pool // *gzip.Reader
	lz4Pool  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdPool sync.Pool // *zstd.Decoder, streaming
	// Small frames are decoded whole (zstd's DecodeAll is about a fifth
	// faster than its stream) by decoders that refuse to produce more than
	// zstdWholeFrameMax, into pooled buffers of that size: bounded memory
	// per batch all the same.
	zstdWholePool sync.Pool // *zstd.Decoder with WithDecoderMaxMemory(zstdWholeFrameMax)
	zstdBufPool   = sync.Pool{New: func() any { b := make([]byte, 0, zstdWholeFrameMax); return &b }}
	bufioPool     = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	sourcePool    = sync.Pool{New: func() any { return new(streamSource) }}
)

// openRecords returns the records of a record section compressed with
// codec. An uncompressed section is walked in place; a compressed one is
// inflated as a stream, one record at a time, each record and the whole
// section bounded by limit (ErrInflatedTooLarge). Errors of the codec
// wrap ErrCorruptBatch.
//
// A section whose size is known up front and small enough (a raw snappy
// block, a zstd frame declaring at most zstdWholeFrameMax) is decoded
// whole into a pooled buffer and walked in place like an uncompressed
// one: no stream, no copy of each record out of it.
func openRecords(codec int, data []byte, limit int64) (recordSource, error) {
	switch codec {
	case CodecNone:
		return &sliceSource{b: data}, nil
	case CodecSnappy:
		if !bytes.HasPrefix(data, xerialMagic) {
			return openSnappyBlock(data, limit)
		}
	case CodecZstd:
		if src, ok := openZstdWhole(data, limit); ok {
			return src, nil
		}
	}
	s := sourcePool.Get().(*streamSource)
	s.limit, s.total, s.read = limit, limit, 0
	var r io.Reader
	var err error
	switch codec {
	case CodecGzip:
		r, err = s.openGzip(data)
	case CodecSnappy:
		r, err = openXerial(data, limit) // raw blocks: above
	case CodecLZ4:
		zr := lz4Pool.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(data))
		s.put = func() { zr.Reset(nil); lz4Pool.Put(zr) }
		r = zr
	case CodecZstd:
		r, err = s.openZstd(data)
	default:
		err = fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, codec)
	}
	if err != nil {
		s.release()
		return nil, err
	}
	s.br = bufioPool.Get().(*bufio.Reader)
	s.br.Reset(r)
	return s, nil
}

func (s *streamSource) openGzip(data []byte) (io.Reader, error) {
	zr, _ := gzipPool.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(data))
	} else {
		err = zr.Reset(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	s.put = func() { gzipPool.Put(zr) }
	return zr, nil
}

func (s *streamSource) openZstd(data []byte) (io.Reader, error) {
	zr, _ := zstdPool.Get().(*zstd.Decoder)
	if zr == nil {
		var err error
		// Concurrency 1 decodes on the caller's goroutine: the decoder
		// starts none, so a pooled one the GC drops leaks nothing.
		zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, err
		}
	}
	// A bytes.Reader (not a Buffer) makes Reset stream instead of
	// decoding the whole frame into memory.
	if err := zr.Reset(bytes.NewReader(data)); err != nil {
		zstdPool.Put(zr)
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
	}
	s.put = func() { _ = zr.Reset(nil); zstdPool.Put(zr) }
	return zr, nil
}

// openZstdWhole decodes data in one call when its frame declares a small
// content size (within limit); ok false: stream it instead (no size
// declared, too large, or anything the whole-frame decoder refuses, which
// the stream then reports as it would).
func openZstdWhole(data []byte, limit int64) (recordSource, bool) {
	var h zstd.Header
	if err := h.Decode(data); err != nil || !h.HasFCS || h.FrameContentSize > zstdWholeFrameMax ||
		int64(h.FrameContentSize) > limit && limit > 0 {
		return nil, false
	}
	zr, _ := zstdWholePool.Get().(*zstd.Decoder)
	if zr == nil {
		var err error
		zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(zstdWholeFrameMax))
		if err != nil {
			return nil, false
		}
	}
	bp := zstdBufPool.Get().(*[]byte)
	out, err := zr.DecodeAll(data, (*bp)[:0])
	zstdWholePool.Put(zr)
	if err != nil || cap(out) > zstdWholeFrameMax {
		zstdBufPool.Put(bp)
		return nil, false
	}
	*bp = out
	return &sliceSource{b: out, limit: limit, put: func() { *bp = (*bp)[:0]; zstdBufPool.Put(bp) }}, true
}

// snappyBufPool holds the buffers raw snappy blocks are decoded into;
// buffers over snappyBufKeep (a batch above Kafka's default 1 MiB
// max.message.bytes, many times over) are not kept.
var snappyBufPool sync.Pool // *[]byte

const snappyBufKeep = 8 << 20

// openSnappyBlock decodes a raw snappy block whole (its decoded length is
// in its header, checked against limit before decoding).
func openSnappyBlock(data []byte, limit int64) (recordSource, error) {
	n, err := snappy.DecodedLen(data)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("%w: a snappy block of %d bytes, limit %d", ErrInflatedTooLarge, n, limit)
	}
	bp, _ := snappyBufPool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	out, err := s2.Decode((*bp)[:n], data)
	put := func() {
		if cap(*bp) <= snappyBufKeep {
			snappyBufPool.Put(bp)
		}
	}
	if err != nil {
		put()
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	return &sliceSource{b: out, limit: limit, put: put}, nil
}

// openXerial reads the xerial framing of Java clients' snappy, chunk by
// chunk (raw blocks are decoded whole: openSnappyBlock).
func openXerial(data []byte, limit int64) (io.Reader, error) {
	if len(data) < 16 {
		return nil, fmt.Errorf("%w: snappy: short xerial header", ErrCorruptBatch)
	}
	return &xerialReader{src: data[16:], limit: limit}, nil
}

// xerialReader decodes xerial-framed snappy one chunk (a length-prefixed
// snappy block) at a time.
type xerialReader struct {
	src   []byte
	chunk []byte
	limit int64
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.chunk) == 0 {
		if len(x.src) == 0 {
			return 0, io.EOF
		}
		if len(x.src) < 4 {
			return 0, errors.New("snappy: xerial chunk length cut short")
		}
		n := int64(binary.BigEndian.Uint32(x.src))
		if n > int64(len(x.src)-4) {
			return 0, fmt.Errorf("snappy: xerial chunk of %d bytes, %d left", n, len(x.src)-4)
		}
		block := x.src[4 : 4+n]
		x.src = x.src[4+n:]
		dl, err := snappy.DecodedLen(block)
		if err != nil {
			return 0, fmt.Errorf("snappy: %v", err)
		}
		if int64(dl) > x.limit {
			return 0, fmt.Errorf("%w: a snappy chunk of %d bytes, limit %d", ErrInflatedTooLarge, dl, x.limit)
		}
		if x.chunk, err = s2.Decode(x.chunk[:cap(x.chunk)], block); err != nil {
			return 0, fmt.Errorf("snappy: %v", err)
		}
	}
	n := copy(p, x.chunk)
	x.chunk = x.chunk[n:]
	return n, nil
}

// streamSource yields the records of a decompressing stream, reading each
// into one reused buffer.
type streamSource struct {
	br    *bufio.Reader
	put   func() // returns the decompressor to its pool
	buf   []byte
	read  int64 // decompressed bytes consumed
	limit int64 // bound on one record
	total int64 // bound on read; <= 0: none
}

// recordChunk is how much of a record's declared length is read (and the
// buffer grown) at a time, so a lying length costs no more memory than the
// stream really holds.
const recordChunk = 64 << 10

func (s *streamSource) next() ([]byte, error) {
	s.buf = s.buf[:0]
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			return nil, streamErr(err, len(s.buf) == 0)
		}
		s.buf = append(s.buf, c)
		if c < 0x80 || len(s.buf) == binary.MaxVarintLen64 {
			break
		}
	}
	length, n := binary.Varint(s.buf)
	if n <= 0 || length < 0 {
		return nil, errRecordLength
	}
	if length > s.limit || (s.total > 0 && s.read+int64(n)+length > s.total) {
		return nil, fmt.Errorf("%w: a record of %d bytes after %d, limit %d", ErrInflatedTooLarge, length, s.read, s.limit)
	}
	for left := int(length); left > 0; {
		step := min(left, recordChunk)
		at := len(s.buf)
		s.buf = append(s.buf, make([]byte, step)...)
		if _, err := io.ReadFull(s.br, s.buf[at:]); err != nil {
			return nil, streamErr(err, false)
		}
		left -= step
	}
	s.read += int64(len(s.buf))
	return s.buf, nil
}

// streamErr describes a read error of the stream; a clean end before a
// record is a short count, inside one a cut record.
func streamErr(err error, atStart bool) error {
	switch {
	case errors.Is(err, ErrInflatedTooLarge):
		return err
	case errors.Is(err, io.EOF) && atStart:
		return errors.New("fewer records than the count")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("record cut short")
	}
	return fmt.Errorf("decompress: %v", err)
}

func (s *streamSource) finish() error {
	// Reading to the end also makes gzip check its CRC and length.
	c, err := s.br.ReadByte()
	switch {
	case err == nil:
		return fmt.Errorf("bytes (0x%02x...) after the last record", c)
	case errors.Is(err, io.EOF):
		return nil
	}
	return fmt.Errorf("decompress: %v", err)
}

func (s *streamSource) setTotalLimit(n int64) { s.total = n }

func (s *streamSource) release() {
	if s.br != nil {
		s.br.Reset(nil)
		bufioPool.Put(s.br)
	}
	if s.put != nil {
		s.put()
	}
	if cap(s.buf) > recordChunk {
		s.buf = nil // keep only small buffers in the pool
	}
	*s = streamSource{buf: s.buf[:0]}
	sourcePool.Put(s)
}

// Compress encodes data with codec; xerialFraming keeps snappy batches in
// the framing the producer used.
func Compress(codec int, data []byte, xerialFraming bool) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecNone:
		return data, nil
	case CodecSnappy:
		if xerialFraming {
			return xerial.Encode(nil, data), nil
		}
		return snappy.Encode(nil, data), nil
	case CodecGzip:
		w = gzip.NewWriter(&buf)
	case CodecLZ4:
		w = lz4.NewWriter(&buf)
	case CodecZstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		w = zw
	default:
		return nil, fmt.Errorf("segments: unknown codec %d", codec)
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
