package rest

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/internal/alloctest"
)

// FuzzDecodeOctetRecord: whatever the Runnel-* headers and partition, the
// octet-stream record decoder answers a record or a 400 naming the header
// or query field, and allocates within alloctest.Limit of its input.
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
		n := alloctest.Bytes(func() { rec, err = decodeOctetRecord(h, q, body) })
		if limit := alloctest.Limit(len(key)+2*len(header)+len(ts)+len(part), 0); n > limit {
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
