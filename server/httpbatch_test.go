package server

import (
	"runtime"
	"testing"

	"github.com/runnel/runnel/api"
)

// FuzzCheckHTTPBatches: whatever a record batch body holds, the header
// check answers a record count or an error the HTTP door maps to a 4xx,
// never panics, and allocates at most a constant (it reads headers in
// place; the records are the log's to validate).
func FuzzCheckHTTPBatches(f *testing.F) {
	good := buildBatch([]newRecord{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("w")}})
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
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		n, err = checkHTTPBatches(body, maxRecords)
		runtime.ReadMemStats(&after)
		if a := after.TotalAlloc - before.TotalAlloc; a > 16<<10 {
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
