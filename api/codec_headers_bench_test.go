package api

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkEncodeConsumedHeaders measures what header_list adds to a consume
// answer: 100 records of 1 KiB with 3 headers each, encoded as HTTP consume
// does, with and without header_list (the baseline: the headers object only,
// as before it existed).
func BenchmarkEncodeConsumedHeaders(b *testing.B) {
	recs := make([]ConsumedRecord, 100)
	for i := range recs {
		recs[i] = ConsumedRecord{Offset: int64(i), Timestamp: time.UnixMilli(1700000000000), Key: []byte(fmt.Sprint("key-", i)),
			Value: []byte(fmt.Sprintf(`{"n":%d,"pad":"%01000d"}`, i, 0)),
			Headers: []Header{{Key: "trace-id", Value: []byte("4bf92f3577b34da6a3ce929d0e0e4736")},
				{Key: "source", Value: []byte("web")}, {Key: "retry", Value: []byte("0")}}}
	}
	for _, list := range []bool{false, true} {
		b.Run(map[bool]string{false: "headers-object-only", true: "with-header_list"}[list], func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for i := 0; i < b.N; i++ {
				out := make([]ConsumedJSON, len(recs))
				for j, r := range recs {
					out[j] = EncodeRecord(r, EncodingJSON)
					if !list {
						out[j].HeaderList = nil
					}
				}
				body, err := json.Marshal(out)
				if err != nil {
					b.Fatal(err)
				}
				n = len(body)
			}
			b.SetBytes(int64(n))
		})
	}
}
