package recordbatch

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Build, which every writer of a new batch goes through (and the other
// packages' tests), writes the same bytes as kmsg's whole-batch encoder:
// records out of timestamp order, tombstones, empty and nil keys, headers
// (one with a nil value), one record or many.
func TestBuildMatchesKmsg(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 300) // a length varint of two bytes
	for name, recs := range map[string][]rec{
		"one":       {{key: []byte("k"), value: []byte("v"), ts: 5}},
		"tombstone": {{key: []byte("k"), ts: 1}},
		"nil key":   {{value: []byte("v"), ts: 1_700_000_000_000}},
		"unordered": {{key: []byte("a"), value: big, ts: 30}, {key: []byte{}, value: []byte{}, ts: 10}, {value: []byte("c"), ts: 20}},
		"headers": {{key: []byte("k"), value: []byte("v"), ts: 2,
			headers: []kmsg.Header{{Key: "h", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "z", Value: big}}}},
	} {
		nr := make([]NewRecord, len(recs))
		for i, r := range recs {
			nr[i] = NewRecord{Key: r.key, Value: r.value, Headers: r.headers, Timestamp: r.ts}
		}
		if got, want := Build(nr), buildBatch(recs); !bytes.Equal(got, want) {
			t.Errorf("%s: Build wrote\n%x\nkmsg\n%x", name, got, want)
		}
	}
	many := make([]rec, 200)
	nr := make([]NewRecord, len(many))
	for i := range many {
		many[i] = rec{key: []byte{byte(i)}, value: bytes.Repeat([]byte{byte(i)}, i), ts: int64(1000 - i)}
		nr[i] = NewRecord{Key: many[i].key, Value: many[i].value, Timestamp: many[i].ts}
	}
	if !bytes.Equal(Build(nr), buildBatch(many)) {
		t.Error("200 records: Build and kmsg disagree")
	}
}
