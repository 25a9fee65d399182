package rest

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/runnel/runnel/api"
)

// The allocation bound of a decoder of untrusted bytes: allocFactor x its
// input + allocSlack (api's codec_alloc_test.go holds the same for the
// produce decoders).
const (
	allocFactor = 8
	allocSlack  = 64 << 10
)

// allocated is what fn allocated, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzDecodeOctetRecord: whatever the Runnel-* headers and partition, the
// octet-stream record decoder answers a record or a 400 naming the header
// or query field, and allocates within allocFactor x its input + allocSlack.
func FuzzDecodeOctetRecord(f *testing.F) {
	f.Add("k%20ey", "a=1,b,c=%E2%82%AC", "1700000000000", "1", []byte("value"))
	f.Add("%zz", "=,,=%", "-1", "x", []byte{})
	f.Fuzz(func(t *testing.T, key, header, ts, part string, body []byte) {
		h := http.Header{}
		if key != "" {
			h.Set(api.HeaderKey, key)
		}
		h.Add(api.HeaderHeader, header)
		h.Add(api.HeaderHeader, header)
		h.Set(api.HeaderTimestamp, ts)
		q := url.Values{"partition": {part}}
		var rec api.ProduceRecord
		var err error
		n := allocated(func() { rec, err = decodeOctetRecord(h, q, body) })
		if limit := uint64(allocFactor*(len(key)+2*len(header)+len(ts)+len(part)) + allocSlack); n > limit {
			t.Fatalf("allocated %d, over %d", n, limit)
		}
		if err != nil {
			var fe *api.FieldError
			if !errors.As(err, &fe) || !(strings.HasPrefix(fe.Field, "header.") || fe.Field == "query.partition") || api.KindOf(err).Status != 400 {
				t.Fatalf("error %v is not a 400 naming a header or query field", err)
			}
			return
		}
		if !bytes.Equal(rec.Value, body) || rec.Value == nil {
			t.Fatalf("value %q, body %q", rec.Value, body)
		}
	})
}

// FuzzIdempotencyKeyHeader: any Idempotency-Key value is taken as a key of
// 1 to MaxIdempotencyKeyLen printable ASCII bytes or refused with a 400
// field error; nothing panics.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	for _, s := range []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `bare-token`, `""`, `"a\"b"`, `"\x00"`, `"\u00e9"`, `"unterminated`, `"a" "b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := &http.Request{Header: http.Header{api.IdempotencyKeyHeader: {v}}}
		key, ok, err := parseIdempotencyKey(r)
		if err != nil {
			var fe *api.FieldError
			if ok || !errors.As(err, &fe) || !errors.Is(err, api.ErrInvalidRequest) {
				t.Fatalf("%q: %v (ok %v), want a 400 field error", v, err, ok)
			}
			return
		}
		if !ok || len(key) == 0 || len(key) > api.MaxIdempotencyKeyLen {
			t.Fatalf("%q: key %q ok %v", v, key, ok)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("%q: key %q has byte %#x", v, key, key[i])
			}
		}
	})
}
