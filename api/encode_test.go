package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

var consumedSeeds = []ConsumedRecord{
	{Partition: 1, Offset: 7, Timestamp: time.UnixMilli(1700000000123), Key: []byte("k"), Value: []byte(`{"a": [1, 2 ], "b":"<&>"}`)},
	{Value: []byte("plain text \"quoted\"\n\t\x01 é")},
	{Key: []byte{0xff, 0}, Value: []byte{0xfe, 0xff, 1}},
	{Value: []byte(`"a json string"`), Headers: []Header{{Key: "b", Value: []byte("2")}, {Key: "a", Value: nil}, {Key: "b", Value: []byte("3")}}},
	{Headers: []Header{{Key: "x\xff", Value: []byte{0xff}}, {Key: "", Value: []byte("")}}},
	{Value: []byte("12 34"), Key: []byte{}},
	{Value: []byte("\u2028<>")},
	{Value: []byte(`{"big":1e400,"n":-0.5E+3}`)},
}

// AppendConsumed renders the same JSON value as encoding/json renders of
// EncodeRecord, for every encoding.
func TestAppendConsumedMatchesMarshal(t *testing.T) {
	for _, enc := range []string{EncodingJSON, EncodingString, EncodingBase64} {
		for i, r := range consumedSeeds {
			checkAppendConsumed(t, r, enc, i)
			r.Transactional = true // "transactional":true, only when true
			checkAppendConsumed(t, r, enc, i)
			r.Control = &ControlMarker{Type: ControlAbort, ProducerID: 1<<62 + 5, ProducerEpoch: -1, CoordinatorEpoch: 7}
			checkAppendConsumed(t, r, enc, i)
		}
	}
}

func checkAppendConsumed(t *testing.T, r ConsumedRecord, enc string, i int) {
	t.Helper()
	want, err := json.Marshal(EncodeRecord(r, enc))
	if err != nil {
		t.Fatal(err)
	}
	got := AppendConsumed(nil, r, enc)
	// Numbers stay json.Number: 1e400 is valid JSON but no float64.
	var w, g any
	if err := unmarshalNumbers(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := unmarshalNumbers(got, &g); err != nil {
		t.Fatalf("%s record %d: invalid JSON %s: %v", enc, i, got, err)
	}
	if !reflect.DeepEqual(w, g) {
		t.Fatalf("%s record %d:\n got %s\nwant %s", enc, i, got, want)
	}
}

func unmarshalNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// FuzzAppendConsumed: whatever the stored bytes, the consume encoder
// writes valid JSON equal to what encoding/json makes of the record.
func FuzzAppendConsumed(f *testing.F) {
	for _, r := range consumedSeeds {
		var hk string
		var hv []byte
		if len(r.Headers) > 0 {
			hk, hv = r.Headers[0].Key, r.Headers[0].Value
		}
		f.Add(r.Key, r.Value, hk, hv, uint8(0))
	}
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte, sel uint8) {
		enc := []string{EncodingJSON, EncodingString, EncodingBase64}[int(sel)%3]
		r := ConsumedRecord{Key: key, Value: value, Headers: []Header{{Key: hk, Value: hv}, {Key: "z", Value: key}}}
		if sel&4 != 0 {
			r.Key, r.Headers = nil, nil
		}
		r.Transactional = sel&8 != 0
		checkAppendConsumed(t, r, enc, 0)
	})
}

func BenchmarkAppendConsumed(b *testing.B) {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i * 7)
	}
	r := ConsumedRecord{Offset: 123456, Timestamp: time.Now(), Value: value, Headers: []Header{{Key: "h", Value: []byte("v")}}}
	for _, enc := range []string{EncodingBase64, EncodingString} {
		b.Run("new/"+enc, func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = AppendConsumed(buf[:0], r, enc)
			}
		})
		b.Run("marshal/"+enc, func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = json.Marshal(EncodeRecord(r, enc))
			}
		})
	}
}

// hasControl (eight bytes at a time) agrees with a byte loop.
func FuzzHasControl(f *testing.F) {
	f.Add([]byte("plain ascii text, long enough for words\x1f"))
	f.Add([]byte{0x80, 0xff, 0x20, 0x7f, 0x9f, 0xa0, 0x21, 0x00, 0x41})
	f.Fuzz(func(t *testing.T, s []byte) {
		want := false
		for _, c := range s {
			want = want || c < 0x20
		}
		if got := hasControl(s); got != want {
			t.Fatalf("hasControl(%q) = %v", s, got)
		}
	})
}
