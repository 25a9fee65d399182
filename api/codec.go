package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Encodings of keys, values and header values in JSON (query `encoding`).
const (
	EncodingJSON   = "json"
	EncodingString = "string"
	EncodingBase64 = "base64"
)

// wireRecord is one produce record as sent. Every field stays raw so a type
// error can name its record; null and absent mean the same. One wireRecord is
// reused for every record of a body (reset keeps the buffers), so decoding
// allocates only what the records keep.
type wireRecord struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   json.RawMessage `json:"headers"`
	Partition json.RawMessage `json:"partition"`
	Timestamp json.RawMessage `json:"timestamp"`

	headers []Header // scratch: a record's headers before their exact-size copy
}

func (wr *wireRecord) reset() {
	wr.Key, wr.Value, wr.Headers = wr.Key[:0], wr.Value[:0], wr.Headers[:0]
	wr.Partition, wr.Timestamp = wr.Partition[:0], wr.Timestamp[:0]
}

func isNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-ndjson"
}

// decodeProduce decodes a produce body of either content type. It checks
// everything the backend does not need to: a nil error means every record is
// well formed. Both decoders stream: one json.Decoder walks the body, counts
// records as it goes and stops at maxRecords before decoding one more, so
// memory follows what the records keep (at most their bytes plus a fixed
// size each), never a copy of the whole body as generic values.
func decodeProduce(contentType string, body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
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

// decodeProduceJSON decodes {"records":[...]}.
func decodeProduceJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
	dec := newStrictDecoder(body)
	if t, err := dec.Token(); err != nil {
		return nil, jsonProblem("body", err)
	} else if t != json.Delim('{') {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "must be an object with records"}
	}
	var out []ProduceRecord
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, jsonProblem("body", err)
		}
		if name, _ := t.(string); name != "records" || seen {
			return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: fmt.Sprintf("unknown or repeated field %q", name)}
		}
		seen = true
		if out, err = decodeRecordArray(dec, enc, maxRecords); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, jsonProblem("body", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "unexpected data after the JSON value"}
	}
	if len(out) == 0 {
		return nil, &FieldError{Field: "body.records", Err: ErrInvalidRequest, Msg: "at least one record is required"}
	}
	return out, nil
}

// decodeRecordArray decodes the value of "records": an array (or null).
func decodeRecordArray(dec *json.Decoder, enc string, maxRecords int) ([]ProduceRecord, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, jsonProblem("body.records", err)
	}
	if t == nil {
		return nil, nil
	}
	if t != json.Delim('[') {
		return nil, &FieldError{Field: "body.records", Err: ErrInvalidRequest, Msg: "must be an array of records"}
	}
	var out recordList
	var wr wireRecord
	for i := 0; dec.More(); i++ {
		if i >= maxRecords {
			return nil, tooManyRecords("body.records", maxRecords)
		}
		wr.reset()
		if err := dec.Decode(&wr); err != nil {
			return nil, jsonProblem(recordField(i), err)
		}
		rec, err := wr.decode(enc)
		if err != nil {
			return nil, err.under(recordField(i))
		}
		out.add(rec)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, jsonProblem("body.records", err)
	}
	return out.records(), nil
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

// decodeProduceNDJSON decodes one record object per line; blank lines are
// skipped, a trailing \r is ignored. Fields are named body.line[N] (1-based).
// One decoder reads the values; the bytes between them must hold exactly one
// line break, so a line is one record as before.
func decodeProduceNDJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
	dec := newStrictDecoder(body)
	var out recordList
	var wr wireRecord
	line, pos := 1, 0
	for {
		start := pos
		for start < len(body) && isJSONSpace(body[start]) {
			if body[start] == '\n' {
				line++
			}
			start++
		}
		if start == len(body) {
			break
		}
		field := "body.line[" + strconv.Itoa(line) + "]"
		if out.n >= maxRecords {
			return nil, tooManyRecords(field, maxRecords)
		}
		wr.reset()
		if err := dec.Decode(&wr); err != nil {
			return nil, jsonProblem(field, err)
		}
		end := int(dec.InputOffset())
		if bytes.IndexByte(body[start:end], '\n') >= 0 {
			return nil, &FieldError{Field: field, Err: ErrMalformedJSON, Msg: "a record must be one line"}
		}
		for end < len(body) && (body[end] == ' ' || body[end] == '\t' || body[end] == '\r') {
			end++
		}
		if end < len(body) && body[end] != '\n' {
			return nil, &FieldError{Field: field, Err: ErrInvalidRequest, Msg: "unexpected data after the JSON value"}
		}
		rec, ferr := wr.decode(enc)
		if ferr != nil {
			return nil, ferr.under(field)
		}
		out.add(rec)
		pos = end
	}
	if out.n == 0 {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "at least one record line is required"}
	}
	return out.records(), nil
}

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

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// recordError is a bad field of one record, named relative to the record
// (".key"); under names the record, built only when there is an error.
type recordError struct{ sub, msg string }

func (e *recordError) under(record string) error {
	return &FieldError{Field: record + e.sub, Err: ErrInvalidRequest, Msg: e.msg}
}

func (wr *wireRecord) decode(enc string) (ProduceRecord, *recordError) {
	var rec ProduceRecord
	var err error
	if rec.Key, err = decodeBytes(wr.Key, enc, false); err != nil {
		return rec, &recordError{".key", err.Error()}
	}
	if rec.Value, err = decodeBytes(wr.Value, enc, true); err != nil {
		return rec, &recordError{".value", err.Error()}
	}
	if wr.headers, err = decodeHeaders(wr.headers[:0], wr.Headers, enc); err != nil {
		return rec, &recordError{".headers", err.Error()}
	}
	if len(wr.headers) > 0 {
		rec.Headers = slices.Clone(wr.headers)
		clear(wr.headers) // the scratch keeps no record's bytes alive
	}
	if !isNull(wr.Partition) {
		p, ok := parseNonNegative(wr.Partition, 1<<31-1)
		if !ok {
			return rec, &recordError{".partition", "must be an integer from 0 to 2147483647"}
		}
		p32 := int32(p)
		rec.Partition = &p32
	}
	if !isNull(wr.Timestamp) {
		ms, ok := parseNonNegative(wr.Timestamp, 1<<63-1)
		if !ok {
			return rec, &recordError{".timestamp", "must be a non-negative integer (ms since the epoch)"}
		}
		ts := time.UnixMilli(ms)
		rec.Timestamp = &ts
	}
	return rec, nil
}

// parseNonNegative reads a JSON integer in [0, max] ("-0" is 0) without
// converting it to a string first.
func parseNonNegative(raw []byte, max int64) (int64, bool) {
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

// plainString is the content of a JSON string literal that needs no
// unescaping (raw is valid JSON: no raw quote or control byte inside).
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return nil, false
	}
	return s, true
}

// jsonString is the text of a JSON string literal: the literal's own bytes
// (aliased) when it has no escapes, else a new slice decoded by encoding/json.
func jsonString(raw []byte) (text []byte, aliased, ok bool) {
	if s, ok := plainString(raw); ok {
		return s, true, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, false
	}
	return []byte(s), false, true
}

// decodeBytes turns a key, value or header value into bytes (never aliasing
// raw). With json encoding a value may be any JSON (stored compact);
// everything else is a string.
func decodeBytes(raw json.RawMessage, enc string, anyJSON bool) ([]byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	if enc == EncodingJSON && anyJSON {
		buf := bytes.NewBuffer(make([]byte, 0, len(raw)))
		if err := json.Compact(buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	s, aliased, ok := jsonString(raw)
	if !ok {
		return nil, errors.New("must be a string or null")
	}
	if enc == EncodingBase64 {
		return decodeBase64(s)
	}
	if aliased {
		s = bytes.Clone(s)
	}
	return s, nil
}

// decodeBase64 accepts padded and unpadded standard base64. The buffer is
// sized for the unpadded form, which needs more room for a short tail (three
// characters decode to two bytes unpadded, and to nothing padded).
func decodeBase64(s []byte) ([]byte, error) {
	b := make([]byte, base64.RawStdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		n, err2 := base64.RawStdEncoding.Decode(b, s)
		if err2 == nil {
			return b[:n], nil
		}
		return nil, fmt.Errorf("invalid base64: %v", err)
	}
	return b[:n], nil
}

// decodeHeaders appends the headers of a headers object to hs keeping their
// order (Kafka headers are ordered). A repeated name gives a repeated header.
// raw is valid JSON (the record decoder checked it), so a small scanner walks
// it without a decoder.
func decodeHeaders(hs []Header, raw json.RawMessage, enc string) ([]Header, error) {
	if isNull(raw) {
		return hs, nil
	}
	sc := jsonScanner{b: raw}
	if !sc.consume('{') {
		return nil, errors.New("must be an object of strings")
	}
	for !sc.consume('}') {
		sc.consume(',')
		nameRaw := sc.stringLiteral()
		name, _, _ := jsonString(nameRaw) // object keys are always strings
		sc.consume(':')
		sc.space()
		var val []byte
		switch {
		case sc.peek() == '"':
			v, err := decodeBytes(sc.stringLiteral(), enc, false)
			if err != nil {
				return nil, fmt.Errorf("header %q: %v", name, err)
			}
			val = v
		case sc.peek() == 'n':
			sc.i += len("null")
		default:
			return nil, fmt.Errorf("header %q: must be a string or null", name)
		}
		hs = append(hs, Header{Key: string(name), Value: val})
	}
	return hs, nil
}

// jsonScanner steps through JSON already known to be valid.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) && isJSONSpace(s.b[s.i]) {
		s.i++
	}
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// consume skips space and c when c comes next.
func (s *jsonScanner) consume(c byte) bool {
	s.space()
	if s.peek() == c {
		s.i++
		return true
	}
	return s.i >= len(s.b) // never loop past the end
}

// stringLiteral returns the next string literal, quotes included.
func (s *jsonScanner) stringLiteral() []byte {
	s.space()
	start := s.i
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return s.b[start:s.i]
		}
	}
	return s.b[start:]
}

// recordSize is what the byte counters count: key, value and headers.
func recordSize(key, value []byte, hs []Header) int64 {
	n := int64(len(key) + len(value))
	for _, h := range hs {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// wireConsumed is ConsumedRecord in JSON (schema ConsumedRecord).
type wireConsumed struct {
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

// encodeRecord renders a record with the documented rule: base64 encoding is
// always base64; otherwise keys/headers are strings when valid UTF-8, values
// are JSON (json encoding, when valid JSON) or strings (valid UTF-8), and
// anything else falls back to base64, said by the *_encoding fields.
// value_encoding tells a JSON string value ("json") from text ("string").
func encodeRecord(r ConsumedRecord, enc string) wireConsumed {
	w := wireConsumed{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	w.Key, w.KeyEncoding = textOrBase64(r.Key, enc)
	w.Value, w.ValueEncoding = encodeValue(r.Value, enc)
	w.HeaderList = encodeHeaders(r.Headers, enc)
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
