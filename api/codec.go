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
// error can name its record; null and absent mean the same.
type wireRecord struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   json.RawMessage `json:"headers"`
	Partition json.RawMessage `json:"partition"`
	Timestamp json.RawMessage `json:"timestamp"`
}

type wireProduce struct {
	Records []wireRecord `json:"records"`
}

func isNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-ndjson"
}

// decodeProduce decodes a produce body of either content type. It checks
// everything the backend does not need to: a nil error means every record is
// well formed.
func decodeProduce(contentType string, body []byte, enc string) ([]ProduceRecord, error) {
	if isNDJSON(contentType) {
		return decodeProduceNDJSON(body, enc)
	}
	return decodeProduceJSON(body, enc)
}

// decodeProduceJSON decodes {"records":[...]}.
func decodeProduceJSON(body []byte, enc string) ([]ProduceRecord, error) {
	var wp wireProduce
	if err := strictUnmarshal(body, &wp); err != nil {
		return nil, jsonProblem("body", err)
	}
	if len(wp.Records) == 0 {
		return nil, &FieldError{Field: "body.records", Err: ErrInvalidRequest, Msg: "at least one record is required"}
	}
	out := make([]ProduceRecord, len(wp.Records))
	for i := range wp.Records {
		rec, err := wp.Records[i].decode(enc, "body.records["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		out[i] = rec
	}
	return out, nil
}

// decodeProduceNDJSON decodes one record object per line; blank lines are
// skipped, a trailing \r is ignored. Fields are named body.line[N] (1-based).
func decodeProduceNDJSON(body []byte, enc string) ([]ProduceRecord, error) {
	var out []ProduceRecord
	for n := 1; len(body) > 0; n++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		field := "body.line[" + strconv.Itoa(n) + "]"
		var wr wireRecord
		if err := strictUnmarshal(line, &wr); err != nil {
			return nil, jsonProblem(field, err)
		}
		rec, err := wr.decode(enc, field)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if len(out) == 0 {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "at least one record line is required"}
	}
	return out, nil
}

// strictUnmarshal is json.Unmarshal refusing unknown fields and trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
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

func (wr *wireRecord) decode(enc, field string) (ProduceRecord, error) {
	var rec ProduceRecord
	var err error
	if rec.Key, err = decodeBytes(wr.Key, enc, false); err != nil {
		return rec, &FieldError{Field: field + ".key", Err: ErrInvalidRequest, Msg: err.Error()}
	}
	if rec.Value, err = decodeBytes(wr.Value, enc, true); err != nil {
		return rec, &FieldError{Field: field + ".value", Err: ErrInvalidRequest, Msg: err.Error()}
	}
	if rec.Headers, err = decodeHeaders(wr.Headers, enc); err != nil {
		return rec, &FieldError{Field: field + ".headers", Err: ErrInvalidRequest, Msg: err.Error()}
	}
	if !isNull(wr.Partition) {
		p, err := strconv.ParseInt(string(wr.Partition), 10, 32)
		if err != nil || p < 0 {
			return rec, &FieldError{Field: field + ".partition", Err: ErrInvalidRequest, Msg: "must be an integer from 0 to 2147483647"}
		}
		p32 := int32(p)
		rec.Partition = &p32
	}
	if !isNull(wr.Timestamp) {
		ms, err := strconv.ParseInt(string(wr.Timestamp), 10, 64)
		if err != nil || ms < 0 {
			return rec, &FieldError{Field: field + ".timestamp", Err: ErrInvalidRequest, Msg: "must be a non-negative integer (ms since the epoch)"}
		}
		ts := time.UnixMilli(ms)
		rec.Timestamp = &ts
	}
	return rec, nil
}

// decodeBytes turns a key, value or header value into bytes. With json
// encoding a value may be any JSON (stored compact); everything else is a string.
func decodeBytes(raw json.RawMessage, enc string, anyJSON bool) ([]byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	if enc == EncodingJSON && anyJSON {
		var buf bytes.Buffer
		buf.Grow(len(raw))
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("must be a string or null")
	}
	if enc == EncodingBase64 {
		return decodeBase64(s)
	}
	return []byte(s), nil
}

func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b2, err2 := base64.RawStdEncoding.DecodeString(s); err2 == nil {
			return b2, nil
		}
		return nil, fmt.Errorf("invalid base64: %v", err)
	}
	return b, nil
}

// decodeHeaders reads a headers object keeping its order (Kafka headers are
// ordered). A repeated name gives a repeated header.
func decodeHeaders(raw json.RawMessage, enc string) ([]Header, error) {
	if isNull(raw) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("must be an object of strings")
	}
	var hs []Header
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		val, err := decodeBytes(v, enc, false)
		if err != nil {
			return nil, fmt.Errorf("header %q: %v", name, err)
		}
		hs = append(hs, Header{Key: name, Value: val})
	}
	return hs, nil
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
