package internode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frames, as the controller RPC carries them: a 4-byte big-endian length,
// then that many bytes, at most MaxFrameBytes.

// MaxFrameBytes bounds a frame (a metadata command is at most 1 MiB).
const MaxFrameBytes = 4 << 20

// ErrFrameTooLarge: a frame announced more than MaxFrameBytes.
var ErrFrameTooLarge = errors.New("internode: frame too large")

// WriteFrame writes b as one frame.
func WriteFrame(w io.Writer, b []byte) error {
	if len(b) > MaxFrameBytes {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(b))
	}
	buf := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	if _, err := w.Write(append(buf, b...)); err != nil {
		return fmt.Errorf("internode: write frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame; io.EOF when the stream ends cleanly before
// it. The length is checked before anything is allocated.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("internode: read frame: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameBytes {
		return nil, fmt.Errorf("%w: %d bytes announced", ErrFrameTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("internode: read frame: %w", err)
	}
	return b, nil
}
