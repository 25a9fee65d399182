package kafkaproto

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDecodeMemoryBoundedByFrame: a request whose array count claims about
// as many elements as the frame has bytes, at every position of a valid
// request of every key and version, makes the decoder allocate at most a
// small multiple of the frame size (kmsg checks counts against the bytes
// left and a minimum element size before allocating).
func TestDecodeMemoryBoundedByFrame(t *testing.T) {
	const pad = 32 << 10
	const maxRatio = 40 // measured: 16x, 32x under the race detector
	n := uint32(pad - 16)
	patches := [][]byte{binary.BigEndian.AppendUint32(nil, n), binary.AppendUvarint(nil, uint64(n)+1)}
	worst := 0.0
	for _, key := range sweepOrder {
		h := handlerTable()[key]
		for v := h.Min; v <= h.Max; v++ {
			req := sweepRequest(key, v)
			req.SetVersion(v)
			body := req.AppendTo(nil)
			for i := range body {
				for _, patch := range patches {
					b := append(append(append([]byte(nil), body[:i]...), patch...), make([]byte, pad)...)
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					r := kmsg.RequestForKey(key)
					r.SetVersion(v)
					_ = r.ReadFrom(b)
					runtime.ReadMemStats(&after)
					ratio := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(b))
					worst = max(worst, ratio)
					if ratio > maxRatio {
						t.Errorf("%s v%d, count %x at byte %d: allocated %.1fx the frame", kmsg.NameForKey(key), v, patch, i, ratio)
					}
				}
			}
		}
	}
	t.Logf("worst allocation: %.1fx the frame size", worst)
}
