package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The json.Decoder produce decoder the scanner in decode.go replaced, kept
// as the reference FuzzDecodeProduceMatchesStd compares it with.

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

// decodeProduceJSON decodes {"records":[...]}.
func stdDecodeProduceJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
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

// decodeProduceNDJSON decodes one record object per line; blank lines are
// skipped, a trailing \r is ignored. Fields are named body.line[N] (1-based).
// One decoder reads the values; the bytes between them must hold exactly one
// line break, so a line is one record as before.
func stdDecodeProduceNDJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
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
		p, ok := ParseNonNegative(wr.Partition, 1<<31-1)
		if !ok {
			return rec, &recordError{".partition", "must be an integer from 0 to 2147483647"}
		}
		p32 := int32(p)
		rec.Partition = &p32
	}
	if !isNull(wr.Timestamp) {
		ms, ok := ParseNonNegative(wr.Timestamp, 1<<63-1)
		if !ok {
			return rec, &recordError{".timestamp", "must be a non-negative integer (ms since the epoch)"}
		}
		ts := time.UnixMilli(ms)
		rec.Timestamp = &ts
	}
	return rec, nil
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
