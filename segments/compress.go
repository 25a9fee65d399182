package segments

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs of the batch attributes' low three bits.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// maxDecompressed bounds what one batch may inflate to when the log decodes
// it (compaction, timestamp search).
const maxDecompressed = 256 << 20

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// batchRecords returns the uncompressed record section of the batch buf.
func batchRecords(h batchHeader, buf []byte) ([]byte, error) {
	data := buf[batchHeaderLen:h.size]
	out, err := decompress(h.compression(), data)
	if err != nil {
		return nil, fmt.Errorf("%w: codec %d: %v", ErrCorruptBatch, h.compression(), err)
	}
	return out, nil
}

func decompress(codec int, data []byte) ([]byte, error) {
	var r io.Reader
	switch codec {
	case codecNone:
		return data, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	case codecSnappy:
		if bytes.HasPrefix(data, xerialMagic) {
			return xerial.Decode(data)
		}
		if n, err := snappy.DecodedLen(data); err != nil || n > maxDecompressed {
			return nil, fmt.Errorf("snappy block of %d bytes: %v", n, err)
		}
		return snappy.Decode(nil, data)
	case codecLZ4:
		r = lz4.NewReader(bytes.NewReader(data))
	case codecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err == nil && len(out) > maxDecompressed {
		err = fmt.Errorf("inflates past %d bytes", maxDecompressed)
	}
	return out, err
}

// compress encodes data with codec; xerialFraming keeps snappy batches in
// the framing the producer used.
func compress(codec int, data []byte, xerialFraming bool) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case codecNone:
		return data, nil
	case codecSnappy:
		if xerialFraming {
			return xerial.Encode(nil, data), nil
		}
		return snappy.Encode(nil, data), nil
	case codecGzip:
		w = gzip.NewWriter(&buf)
	case codecLZ4:
		w = lz4.NewWriter(&buf)
	case codecZstd:
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
