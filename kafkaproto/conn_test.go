package kafkaproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
)

// TestReadFrameSizes: frames up to keepBuffer and larger ones (read
// through pooled blocks into an array of their own) come back whole, one
// after another on a connection; a frame cut short is an error.
func TestReadFrameSizes(t *testing.T) {
	s := NewServer(newMemBroker(), Options{Logger: slog.New(slog.DiscardHandler), MaxRequestSize: 64 << 20})
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{minFrame, readChunk + 1, keepBuffer, keepBuffer + 1, 2*readChunk + keepBuffer + 7, 15 << 20, 3*keepBuffer - 1, 100}
	var stream []byte
	var frames [][]byte
	for _, n := range sizes {
		f := make([]byte, n)
		for i := range f {
			f[i] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint16(f, produceKey)
		frames = append(frames, f)
		stream = binary.BigEndian.AppendUint32(stream, uint32(n))
		stream = append(stream, f...)
	}
	nc := &readConn{}
	nc.r.Reset(stream)
	c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, readChunk)}
	for i, want := range frames {
		got, err := c.readFrame()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d (%d bytes): read %d bytes, %v", i, len(want), len(got), err)
		}
	}
	for _, n := range []int{keepBuffer / 2, 4 * keepBuffer} {
		t.Run(fmt.Sprintf("cut/%d", n), func(t *testing.T) {
			frame := binary.BigEndian.AppendUint32(nil, uint32(n))
			frame = binary.BigEndian.AppendUint16(frame, produceKey)
			frame = append(frame, make([]byte, n/2)...)
			nc.r.Reset(frame)
			c.br.Reset(nc)
			if _, err := c.readFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("frame of %d bytes cut at %d: %v, want unexpected EOF", n, n/2+2, err)
			}
		})
	}
}
