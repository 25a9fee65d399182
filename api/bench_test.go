package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func batchBody(n int) []byte {
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"key":"user-%d","value":{"id":%d,"name":"someone","tags":["a","b"],"score":12.5}}`, i, i))
	}
	return []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
}

// BenchmarkDecodeProduce100 is the baseline: decoding a 100-record batch.
func BenchmarkDecodeProduce100(b *testing.B) {
	body := batchBody(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeProduceJSON(body, EncodingJSON, DefaultMaxProduceRecords); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalGeneric100 calibrates: encoding/json into generic values.
func BenchmarkUnmarshalGeneric100(b *testing.B) {
	body := batchBody(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProduce: the scanner (decode.go) against the json.Decoder
// decoder it replaced, on 500 records of 1 KiB base64 values (JSON and
// NDJSON) and on small JSON-valued records with keys; allocs/record is
// what -benchmem's allocs/op is per record (the target: <= 2).
func BenchmarkDecodeProduce(b *testing.B) {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i*7 + i>>3)
	}
	b64 := base64.StdEncoding.EncodeToString(value)
	var js, nd strings.Builder
	js.WriteString(`{"records":[`)
	for i := range 500 {
		if i > 0 {
			js.WriteByte(',')
		}
		rec := fmt.Sprintf(`{"value":"%s","partition":%d}`, b64, i%3)
		js.WriteString(rec)
		nd.WriteString(rec + "\n")
	}
	js.WriteString(`]}`)
	cases := []struct {
		name, ctype, enc string
		body             []byte
		n                int
	}{
		{"base64-json", "application/json", EncodingBase64, []byte(js.String()), 500},
		{"base64-ndjson", "application/x-ndjson", EncodingBase64, []byte(nd.String()), 500},
		{"json-values", "application/json", EncodingJSON, batchBody(500), 500},
	}
	for _, c := range cases {
		for _, impl := range []struct {
			name string
			fn   func([]byte, string, int) ([]ProduceRecord, error)
		}{{"scanner", decodeProduceJSON}, {"json.Decoder", stdDecodeProduceJSON}} {
			fn := impl.fn
			if c.ctype == "application/x-ndjson" {
				fn = map[string]func([]byte, string, int) ([]ProduceRecord, error){
					"scanner": decodeProduceNDJSON, "json.Decoder": stdDecodeProduceNDJSON}[impl.name]
			}
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fn(c.body, c.enc, DefaultMaxProduceRecords); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(testing.AllocsPerRun(3, func() { _, _ = fn(c.body, c.enc, DefaultMaxProduceRecords) }))/float64(c.n), "allocs/record")
			})
		}
	}
}
