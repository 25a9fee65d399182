package api

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"
)

// The produce decoder's memory contract: it allocates at most
// alloctest.Factor times the body, plus allocPerRecord for each record (its
// fixed-size entry, ~90 bytes, twice: collected, then one exact slice),
// plus a fixed alloctest.Slack (the decoder's own buffers). The record cap
// bounds the per-record part: 10000 records, 1.7 MiB.
const (
	allocPerRecord = 2 * 88
	// fuzzMaxRecords is the record cap under fuzzing: each record costs a
	// fixed-size entry whatever its bytes ("{}" is 3 bytes, its entry 88),
	// so the slack must cover cap entries; the cap, not the factor, bounds
	// bodies of empty records.
	fuzzMaxRecords = 64
)

func checkAllocBound(t *testing.T, what string, body []byte, records int, n uint64) {
	t.Helper()
	if limit := alloctest.Limit(len(body), allocPerRecord*records); n > limit {
		t.Fatalf("%s: decoding %d bytes (%d records) allocated %d, over %d", what, len(body), records, n, limit)
	}
}

// FuzzDecodeProduceAlloc: whatever the body, JSON or NDJSON, decoding
// allocates within alloctest.Factor x body + alloctest.Slack; under the fuzzing cap
// the per-record entries fit in the slack, so this is 8x the input plus a
// constant.
func FuzzDecodeProduceAlloc(f *testing.F) {
	for i, s := range produceSeeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Add([]byte(`{"records":[`+strings.Repeat(`{},`, 200)+`{}]}`), uint8(0))
	f.Add([]byte(`{"records":[{"value":"`+strings.Repeat(`\u00e9`, 500)+`","headers":{"a":"`+strings.Repeat("QUJD", 300)+`"}}]}`), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		enc := []string{EncodingJSON, EncodingString, EncodingBase64}[int(sel)%3]
		ctype := "application/json"
		if sel&4 != 0 {
			ctype = "application/x-ndjson"
		}
		n := alloctest.Bytes(func() { _, _ = DecodeProduce(ctype, body, enc, fuzzMaxRecords) })
		checkAllocBound(t, ctype+" "+enc, body, 0, n)
	})
}

// TestDecodeProduceEmptyRecordsRefusedEarly: 16 MB of {} (5.6 M records)
// is refused at the record cap having allocated less than the body itself.
func TestDecodeProduceEmptyRecordsRefusedEarly(t *testing.T) {
	body := []byte(`{"records":[` + strings.Repeat(`{},`, (16<<20)/3-10) + `{}]}`)
	var err error
	n := alloctest.Bytes(func() { _, err = DecodeProduce("application/json", body, EncodingJSON, DefaultMaxProduceRecords) })
	if !errors.Is(err, ErrTooManyRecords) || KindOf(err).Status != 413 {
		t.Fatalf("err %v, want 413 too many records", err)
	}
	if n > uint64(len(body)/4) {
		t.Fatalf("refusing %d bytes allocated %d", len(body), n)
	}
	nd := bytes.Repeat([]byte("{}\n"), (16<<20)/3)
	n = alloctest.Bytes(func() { _, err = DecodeProduce("application/x-ndjson", nd, EncodingJSON, DefaultMaxProduceRecords) })
	if !errors.Is(err, ErrTooManyRecords) || n > uint64(len(nd)/4) {
		t.Fatalf("ndjson: err %v, allocated %d", err, n)
	}
}

// TestDecodeProduceAllocBound: bodies at the record cap and with large
// values stay within the contract.
func TestDecodeProduceAllocBound(t *testing.T) {
	big := strings.Repeat("QUJD", 1<<18) // 1 MiB of base64
	cases := []struct {
		name, ctype, enc string
		body             []byte
	}{
		{"json objects at the cap", "application/json", EncodingJSON, batchBody(DefaultMaxProduceRecords)},
		{"ndjson objects", "application/x-ndjson", EncodingJSON,
			bytes.ReplaceAll(bytes.TrimSuffix(bytes.TrimPrefix(batchBody(5000), []byte(`{"records":[`)), []byte(`]}`)), []byte(`},{"key"`), []byte("}\n{\"key\""))},
		{"one big base64 value", "application/json", EncodingBase64, []byte(`{"records":[{"value":"` + big + `","key":"` + big + `"}]}`)},
		{"escaped strings", "application/json", EncodingString, []byte(`{"records":[{"value":"` + strings.Repeat(`\n\"`, 1<<18) + `"}]}`)},
		{"headers", "application/json", EncodingString, []byte(`{"records":[` + strings.Repeat(`{"headers":{"a":"b","c":null}},`, 5000) + `{}]}`)},
	}
	for _, c := range cases {
		var recs []ProduceRecord
		var err error
		n := alloctest.Bytes(func() { recs, err = DecodeProduce(c.ctype, c.body, c.enc, DefaultMaxProduceRecords) })
		if err != nil || len(recs) == 0 {
			t.Fatalf("%s: %d records, %v", c.name, len(recs), err)
		}
		checkAllocBound(t, c.name, c.body, len(recs), n)
		t.Logf("%s: %d bytes, allocated %.2fx", c.name, len(c.body), float64(n)/float64(len(c.body)))
	}
}

func TestDecodeProduceRecordCap(t *testing.T) {
	body := []byte(`{"records":[{},{},{}]}`)
	if _, err := decodeProduceJSON(body, EncodingJSON, 3); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	_, err := decodeProduceJSON(body, EncodingJSON, 2)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "body.records" || !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := decodeProduceNDJSON([]byte("{}\n{}\n{}\n"), EncodingJSON, 2); !errors.Is(err, ErrTooManyRecords) {
		t.Fatalf("ndjson over the cap: %v", err)
	}
}

// TestDecodeErrorClipsLongNames: an unknown field or header name of any
// length is quoted clipped, so the message stays small (the fuzzer's
// 3,836-byte body of an invalid-UTF-8 field name allocated 102,696 bytes
// for its message and copies, over the decoder's bound).
func TestDecodeErrorClipsLongNames(t *testing.T) {
	long := strings.Repeat("\xfa", 4000)
	for _, c := range []struct{ ctype, body string }{
		{"application/json", `{"` + long + `":0}`},
		{"application/json", `{"records":[{"` + long + `":0}]}`},
		{"application/x-ndjson", `{"reco` + long + `rds":0}`},
		{"application/json", `{"records":[{"headers":{"` + long + `":1}}]}`},
	} {
		_, err := DecodeProduce(c.ctype, []byte(c.body), EncodingString, fuzzMaxRecords)
		if err == nil {
			t.Fatalf("%s %.40q: no error", c.ctype, c.body)
		}
		if m := err.Error(); len(m) > 400 || !strings.Contains(m, "...") {
			t.Errorf("%s %.40q: message of %d bytes: %.120s", c.ctype, c.body, len(m), m)
		}
		n := alloctest.Bytes(func() { _, _ = DecodeProduce(c.ctype, []byte(c.body), EncodingString, fuzzMaxRecords) })
		checkAllocBound(t, c.ctype, []byte(c.body), 0, n)
	}
}
