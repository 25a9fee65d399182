package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Encodings of keys, values and header values in JSON (query `encoding`).
const (
	EncodingJSON   = "json"
	EncodingString = "string"
	EncodingBase64 = "base64"
)

// DefaultMaxProduceRecords is the default of the most records one produce
// request may carry (the handler's Limits.MaxProduceRecords).
const DefaultMaxProduceRecords = 10000

func isNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-ndjson"
}

// DecodeProduce decodes a produce body of either content type. It checks
// everything the backend does not need to: a nil error means every record is
// well formed. Both decoders stream: one json.Decoder walks the body, counts
// records as it goes and stops at maxRecords before decoding one more, so
// memory follows what the records keep (at most their bytes plus a fixed
// size each), never a copy of the whole body as generic values.
func DecodeProduce(contentType string, body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
	if isNDJSON(contentType) {
		return decodeProduceNDJSON(body, enc, maxRecords)
	}
	return decodeProduceJSON(body, enc, maxRecords)
}

func newStrictDecoder(body []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec
}

func tooManyRecords(field string, max int) error {
	return &FieldError{Field: field, Err: ErrTooManyRecords,
		Msg: fmt.Sprintf("more than %d records; send at most %d per request", max, max)}
}

// recordList collects records in chunks and hands back one slice of exactly
// their count: a slice grown by doubling allocates up to four entries per
// record, this about two (an entry is ~90 bytes whatever the record's size,
// so for small records the entries are most of what decoding costs).
type recordList struct {
	chunks [][]ProduceRecord
	n      int
}

const maxRecordChunk = 1024

func (l *recordList) add(r ProduceRecord) {
	k := len(l.chunks)
	if k == 0 || len(l.chunks[k-1]) == cap(l.chunks[k-1]) {
		l.chunks = append(l.chunks, make([]ProduceRecord, 0, min(8<<k, maxRecordChunk)))
		k++
	}
	l.chunks[k-1] = append(l.chunks[k-1], r)
	l.n++
}

func (l *recordList) records() []ProduceRecord {
	switch len(l.chunks) {
	case 0:
		return nil
	case 1:
		return l.chunks[0]
	}
	out := make([]ProduceRecord, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

func recordField(i int) string { return "body.records[" + strconv.Itoa(i) + "]" }

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// strictUnmarshal is json.Unmarshal refusing unknown fields and trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := newStrictDecoder(data)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// DecodeJSON decodes a JSON request body into v strictly (unknown fields
// and trailing data refused); its errors are body field errors
// (ErrMalformedJSON or ErrInvalidRequest).
func DecodeJSON(body []byte, v any) error {
	if err := strictUnmarshal(body, v); err != nil {
		return jsonProblem("body", err)
	}
	return nil
}

// jsonProblem classifies a decode error: syntax → malformed JSON, else invalid.
func jsonProblem(field string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &FieldError{Field: field, Err: ErrMalformedJSON, Msg: err.Error()}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field += "." + te.Field
	}
	return &FieldError{Field: field, Err: ErrInvalidRequest, Msg: err.Error()}
}

// ParseNonNegative reads a JSON integer in [0, max] ("-0" is 0) without
// converting it to a string first.
func ParseNonNegative(raw []byte, max int64) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
		if len(digits) == 0 || strings.Trim(string(digits), "0") != "" {
			return 0, false
		}
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// RecordSize is what the byte counters count: key, value and headers.
func RecordSize(key, value []byte, hs []Header) int64 {
	n := int64(len(key) + len(value))
	for _, h := range hs {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// ConsumedJSON is ConsumedRecord in JSON (schema ConsumedRecord).
type ConsumedJSON struct {
	Partition       int32              `json:"partition"`
	Offset          int64              `json:"offset"`
	Timestamp       int64              `json:"timestamp"`
	Key             *string            `json:"key"`
	Value           json.RawMessage    `json:"value"`
	Headers         map[string]*string `json:"headers"`
	KeyEncoding     string             `json:"key_encoding"`
	ValueEncoding   string             `json:"value_encoding"`
	HeadersEncoding string             `json:"headers_encoding"`
	HeaderList      []wireHeader       `json:"header_list"`
	Transactional   bool               `json:"transactional,omitempty"`
	Control         *ControlMarker     `json:"control,omitempty"`
}

// wireHeader is one entry of header_list (schema RecordHeader): unlike the
// headers object it keeps every header, in order, repeated keys and keys
// that are not UTF-8 included.
type wireHeader struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"`
	KeyEncoding   string  `json:"key_encoding"`
	ValueEncoding string  `json:"value_encoding"`
}

// encodeHeaders renders header_list: a key is text when valid UTF-8, else
// base64; a value follows the record encoding's rule for keys (base64 when
// asked for or not UTF-8), each header on its own.
func encodeHeaders(hs []Header, enc string) []wireHeader {
	out := make([]wireHeader, len(hs))
	for i, h := range hs {
		out[i].Key, out[i].KeyEncoding = h.Key, EncodingString
		if !utf8.ValidString(h.Key) {
			out[i].Key, out[i].KeyEncoding = base64.StdEncoding.EncodeToString([]byte(h.Key)), EncodingBase64
		}
		out[i].Value, out[i].ValueEncoding = textOrBase64(h.Value, enc)
	}
	return out
}

// EncodeRecord renders a record with the documented rule: base64 encoding is
// always base64; otherwise keys/headers are strings when valid UTF-8, values
// are JSON (json encoding, when valid JSON) or strings (valid UTF-8), and
// anything else falls back to base64, said by the *_encoding fields.
// value_encoding tells a JSON string value ("json") from text ("string").
func EncodeRecord(r ConsumedRecord, enc string) ConsumedJSON {
	w := ConsumedJSON{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	w.Key, w.KeyEncoding = textOrBase64(r.Key, enc)
	w.Value, w.ValueEncoding = encodeValue(r.Value, enc)
	w.HeaderList = encodeHeaders(r.Headers, enc)
	w.Transactional, w.Control = r.Transactional, r.Control
	w.Headers = make(map[string]*string, len(r.Headers))
	w.HeadersEncoding = EncodingString
	if enc == EncodingBase64 || !headersUTF8(r.Headers) {
		w.HeadersEncoding = EncodingBase64
	}
	for _, h := range r.Headers {
		if h.Value == nil {
			w.Headers[h.Key] = nil
			continue
		}
		s := string(h.Value)
		if w.HeadersEncoding == EncodingBase64 {
			s = base64.StdEncoding.EncodeToString(h.Value)
		}
		w.Headers[h.Key] = &s
	}
	return w
}

func headersUTF8(hs []Header) bool {
	for _, h := range hs {
		if !utf8.Valid(h.Value) {
			return false
		}
	}
	return true
}

func textOrBase64(b []byte, enc string) (*string, string) {
	if enc != EncodingBase64 && utf8.Valid(b) {
		if b == nil {
			return nil, EncodingString
		}
		s := string(b)
		return &s, EncodingString
	}
	if b == nil {
		return nil, EncodingBase64
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, EncodingBase64
}

func encodeValue(b []byte, enc string) (json.RawMessage, string) {
	if b == nil {
		return nil, enc
	}
	if enc == EncodingJSON && utf8.Valid(b) && json.Valid(b) {
		return b, EncodingJSON
	}
	// Not JSON (or string/base64 asked for): text stays text, said by
	// value_encoding "string", so a value produced as a string reads back as
	// that string by default; only bytes that are not UTF-8 become base64.
	s, e := textOrBase64(b, enc)
	raw, _ := json.Marshal(*s) // a string always marshals
	return raw, e
}
