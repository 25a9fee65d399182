package httpdoor

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/internal/alloctest"

	"github.com/runnel/runnel/recordbatch"
)

// FuzzCheckHTTPBatches: whatever a record batch body holds, the header
// check answers a record count or an error the HTTP door maps to a 4xx,
// never panics, and allocates at most a constant (it reads headers in
// place; the records are the log's to validate).
func FuzzCheckHTTPBatches(f *testing.F) {
	good := recordbatch.Build([]recordbatch.NewRecord{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("w")}})
	f.Add(good, 10)
	f.Add(append(good, good...), 3)
	f.Add(good[:40], 10)
	idem := append([]byte{}, good...)
	idem[43] = 0 // a producer id other than -1 (and a CRC that no longer matches)
	f.Add(idem, 10)
	f.Fuzz(func(t *testing.T, body []byte, maxRecords int) {
		maxRecords = max(maxRecords%20000, 1)
		var n int
		var err error
		if a := alloctest.Bytes(func() { n, err = checkHTTPBatches(body, maxRecords) }); a > 16<<10 {
			t.Fatalf("allocated %d checking %d bytes", a, len(body))
		}
		if err != nil {
			if s := api.KindOf(toHTTPError(err)).Status; s/100 != 4 {
				t.Fatalf("error %v maps to %d", err, s)
			}
			return
		}
		if n > maxRecords || (n > 0 && len(body) < 61) {
			t.Fatalf("%d records (max %d) in %d bytes", n, maxRecords, len(body))
		}
	})
}

// buildBatch writes a batch the RecordBatch codec (segments) reads back
// record for record: keys, values, headers (in order, null values kept),
// timestamps and offsets.
func TestBuildBatchRoundTrip(t *testing.T) {
	recs := []recordbatch.NewRecord{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000},
		{Value: bytes.Repeat([]byte("x"), 300), Timestamp: 990, Headers: []kmsg.Header{{Key: "a", Value: []byte("1")}, {Key: "a"}}},
		{Key: nil, Value: nil, Timestamp: 1200},
	}
	b := recordbatch.Build(recs)
	info, ok, err := recordbatch.Next(b)
	if err != nil || !ok || info.Size != len(b) || info.NumRecords != 3 || info.FirstTimestamp != 990 || info.MaxTimestamp != 1200 {
		t.Fatalf("header: %+v %v %v (%d bytes)", info, ok, err, len(b))
	}
	it, err := recordbatch.Decode(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var r recordbatch.Record
	for i := 0; it.Next(&r); i++ {
		w := recs[i]
		if r.Offset != int64(i) || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) || (h.Value == nil) != (w.Headers[j].Value == nil) {
				t.Fatalf("record %d header %d: %+v", i, j, h)
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
}
