package segments

import "fmt"

// batchRecords returns the uncompressed record section of the batch buf.
func batchRecords(h batchHeader, buf []byte) ([]byte, error) {
	if h.compression() != 0 {
		return nil, fmt.Errorf("segments: compression codec %d not decoded", h.compression())
	}
	return buf[batchHeaderLen:h.size], nil
}
