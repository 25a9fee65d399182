package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var produceSeeds = []string{
	`{"records":[{"key":"k","value":{"a":[1,2]},"headers":{"h":"v","n":null},"partition":0,"timestamp":5}]}`,
	`{"records":[{"value":null},{"value":"AAE=","key":null}]}`,
	`{"records":[]}`,
	`{"records":[{"value":1e400}]}`,
	`{"records":[{"partition":-1}]}`,
	`{"records":[{"headers":{"a":"1","a":"2"}}]} trailing`,
	"{\"value\":1}\n{\"value\":\"x\",\"key\":\"\\u00e9\"}\r\n\n",
	"\xff\xfe",
}

// encodeBase64Body renders decoded records back as a base64 produce body.
func encodeBase64Body(recs []ProduceRecord) []byte {
	b64 := func(b []byte) any {
		if b == nil {
			return nil
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	var parts []string
	for _, r := range recs {
		m := map[string]any{"key": b64(r.Key), "value": b64(r.Value)}
		if r.Partition != nil {
			m["partition"] = *r.Partition
		}
		if r.Timestamp != nil {
			m["timestamp"] = r.Timestamp.UnixMilli()
		}
		var hs []string
		for _, h := range r.Headers {
			k, _ := json.Marshal(h.Key)
			v, _ := json.Marshal(b64(h.Value))
			hs = append(hs, string(k)+":"+string(v))
		}
		body, _ := json.Marshal(m)
		if len(hs) > 0 {
			body = append(body[:len(body)-1], []byte(`,"headers":{`+strings.Join(hs, ",")+`}}`)...)
		}
		parts = append(parts, string(body))
	}
	return []byte(`{"records":[` + strings.Join(parts, ",") + `]}`)
}

func sameRecords(t *testing.T, a, b []ProduceRecord) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d records, then %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if !bytes.Equal(x.Key, y.Key) || (x.Key == nil) != (y.Key == nil) ||
			!bytes.Equal(x.Value, y.Value) || (x.Value == nil) != (y.Value == nil) ||
			(x.Partition == nil) != (y.Partition == nil) || (x.Partition != nil && *x.Partition != *y.Partition) ||
			(x.Timestamp == nil) != (y.Timestamp == nil) || (x.Timestamp != nil && !x.Timestamp.Equal(*y.Timestamp)) ||
			len(x.Headers) != len(y.Headers) {
			t.Fatalf("record %d changed in a round trip: %+v vs %+v", i, x, y)
		}
		for j := range x.Headers {
			if x.Headers[j].Key != y.Headers[j].Key || !bytes.Equal(x.Headers[j].Value, y.Headers[j].Value) {
				t.Fatalf("record %d header %d changed", i, j)
			}
		}
	}
}

// checkDecoded: an error is one of ours naming a field; a success round-trips
// through the base64 encoding unchanged and JSON values are valid compact JSON.
func checkDecoded(t *testing.T, enc string, recs []ProduceRecord, err error) {
	t.Helper()
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "body") || KindOf(err).Status != 400 {
			t.Fatalf("error %v is not a 400 naming a body field", err)
		}
		return
	}
	if len(recs) == 0 {
		t.Fatal("success with no record")
	}
	for _, r := range recs {
		if enc == EncodingJSON && r.Value != nil {
			var buf bytes.Buffer
			if json.Compact(&buf, r.Value) != nil || !bytes.Equal(buf.Bytes(), r.Value) {
				t.Fatalf("json value %q is not compact JSON", r.Value)
			}
		}
	}
	again, err := decodeProduceJSON(encodeBase64Body(recs), EncodingBase64, DefaultMaxProduceRecords)
	if err != nil {
		t.Fatalf("re-decoding: %v", err)
	}
	sameRecords(t, recs, again)
}

func FuzzDecodeProduceJSON(f *testing.F) {
	for i, s := range produceSeeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, body []byte, encSel uint8) {
		enc := []string{EncodingJSON, EncodingString, EncodingBase64}[int(encSel)%3]
		recs, err := decodeProduceJSON(body, enc, DefaultMaxProduceRecords)
		checkDecoded(t, enc, recs, err)
	})
}

func FuzzDecodeProduceNDJSON(f *testing.F) {
	for i, s := range produceSeeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, body []byte, encSel uint8) {
		enc := []string{EncodingJSON, EncodingString, EncodingBase64}[int(encSel)%3]
		recs, err := decodeProduceNDJSON(body, enc, DefaultMaxProduceRecords)
		checkDecoded(t, enc, recs, err)
		if err == nil && !bytes.Contains(body, []byte("\n")) {
			one, err := decodeProduceJSON([]byte(`{"records":[`+string(bytes.TrimSpace(body))+`]}`), enc, DefaultMaxProduceRecords)
			if err != nil {
				t.Fatalf("a one-line NDJSON body decodes but not as JSON: %v", err)
			}
			sameRecords(t, recs, one)
		}
	})
}

// FuzzEventID: ParseEventID never panics and accepts what FormatEventID makes.
func FuzzEventID(f *testing.F) {
	f.Add("0:5,1:-1")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseEventID(s)
		if err != nil {
			return
		}
		var ps []int32
		for p := range m {
			ps = append(ps, p)
		}
		again, err := ParseEventID(FormatEventID(ps[0], ps, m))
		if err != nil || len(again) != len(m) {
			t.Fatalf("format/parse of %v: %v %v", m, again, err)
		}
		for p, o := range m {
			if again[p] != o {
				t.Fatalf("partition %d: %d became %d", p, o, again[p])
			}
		}
	})
}

// A three-character unpadded base64 value decodes to two bytes; the padded
// decoder's length for it is zero, which once sized the buffer and panicked
// (found by FuzzDecodeProduceJSON).
func TestDecodeBase64ShortUnpaddedTail(t *testing.T) {
	for in, want := range map[string]string{"YWI": "ab", "YWI=": "ab", "YQ": "a", "YQ==": "a", "": ""} {
		got, err := decodeBase64([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("decodeBase64(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	body := []byte(`{"records":[{"value":"YWI"}]}`)
	recs, err := decodeProduceJSON(body, EncodingBase64, DefaultMaxProduceRecords)
	if err != nil || len(recs) != 1 || string(recs[0].Value) != "ab" {
		t.Fatalf("decodeProduceJSON(%s) = %+v, %v", body, recs, err)
	}
}

// FuzzDecodeProduceMatchesStd: the scanner accepts what the json.Decoder
// decoder it replaced accepts, with the same records, and refuses what it
// refuses (both with a 400 or 413 naming a body field).
func FuzzDecodeProduceMatchesStd(f *testing.F) {
	for i, s := range produceSeeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Add([]byte(`{"records":[null,{"Value":"a","KEY":"b","value":"c"}]}`), uint8(1))
	f.Add([]byte(`{"\u0072ecords":[{"headers":{"\u00e9":"\u00e9","b":null},"timestamp":-0,"partition":null}]}`), uint8(1))
	f.Add([]byte("{\"value\":{\"a\" : [1, {\"b\":\"\\\"\"}]}, \"key\":\"x\"}\n{\"value\":\"a\xffb\"}"), uint8(4))
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		enc := []string{EncodingJSON, EncodingString, EncodingBase64}[int(sel)%3]
		got, err := decodeProduceJSON(body, enc, fuzzMaxRecords)
		want, stdErr := stdDecodeProduceJSON(body, enc, fuzzMaxRecords)
		if sel&4 != 0 {
			got, err = decodeProduceNDJSON(body, enc, fuzzMaxRecords)
			want, stdErr = stdDecodeProduceNDJSON(body, enc, fuzzMaxRecords)
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("scanner: %v\nencoding/json: %v", err, stdErr)
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "body") || KindOf(err).Status/100 != 4 {
				t.Fatalf("error %v is not a 4xx naming a body field", err)
			}
			return
		}
		sameRecords(t, got, want)
	})
}

// An empty string is an empty key or value, not a null one, whatever the
// encoding and even as the body's first bytes to decode (found by
// FuzzDecodeProduceMatchesStd: the arena was still nil).
func TestDecodeEmptyStringIsNotNull(t *testing.T) {
	for _, enc := range []string{EncodingJSON, EncodingString, EncodingBase64} {
		for _, body := range []string{`{"records":[{"key":""}]}`, `{"records":[{"keY":"","value":""}]}`} {
			recs, err := decodeProduceJSON([]byte(body), enc, DefaultMaxProduceRecords)
			if err != nil || len(recs) != 1 || recs[0].Key == nil || len(recs[0].Key) != 0 {
				t.Fatalf("%s as %s: %+v, %v; want one record with an empty, non-null key", body, enc, recs, err)
			}
		}
		recs, err := decodeProduceNDJSON([]byte(`{"value":""}`), enc, DefaultMaxProduceRecords)
		if err != nil || len(recs) != 1 || recs[0].Value == nil || recs[0].Key != nil {
			t.Fatalf("ndjson as %s: %+v, %v; want an empty value and a null key", enc, recs, err)
		}
	}
}
