package api

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The produce decoder: one pass over the body with a small JSON scanner
// written for the ProduceRecord shape, no reflection, no token values.
// Keys, values and header values are decoded (base64, unescaped, compacted)
// straight into a few large arenas (a decoded literal is never longer than
// its JSON text, so the rest of the body bounds what is still to come),
// and the records hand out sub-slices of them (capacity-capped, so appending to one
// never reaches the next). Records, headers, partitions and timestamps come
// from chunked slabs, so a body of n records costs a handful of
// allocations, not several per record. Measured against the json.Decoder
// pass it replaced: BenchmarkDecodeProduce.
//
// Strictness is encoding/json's: unknown fields are refused (field names
// match case-insensitively, escapes allowed), a repeated field's last value
// wins, JSON values are checked and compacted by json.Compact, strings with
// escapes or bytes that are not UTF-8 are decoded by encoding/json.
// FuzzDecodeProduceMatchesStd holds it to the json.Decoder decoder.

// produceDecoder is one body's decoding state.
type produceDecoder struct {
	b      []byte
	i      int
	enc    string
	ndjson bool
	line   int // NDJSON: the line being decoded (records are named by it)

	arena []byte
	recs  recordList
	hdrs  []Header
	parts []int32
	times []time.Time
	hs    []Header // one record's headers before they move to hdrs
}

func newProduceDecoder(body []byte, enc string, ndjson bool) *produceDecoder {
	return &produceDecoder{b: body, enc: enc, ndjson: ndjson, line: 1}
}

// decodeProduceJSON decodes {"records":[...]}.
func decodeProduceJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
	d := newProduceDecoder(body, enc, false)
	d.ws()
	if d.peek() != '{' {
		if d.i == len(d.b) {
			return nil, d.syntax("body", "unexpected end of JSON input")
		}
		if !isValueStart(d.peek()) {
			return nil, d.syntax("body", "invalid character "+quoteChar(d.peek())+" looking for beginning of value")
		}
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "must be an object with records"}
	}
	d.i++
	seen := false
	for first := true; ; first = false {
		d.ws()
		if d.peek() == '}' {
			d.i++
			break
		}
		if !first {
			if !d.consume(',') {
				return nil, d.syntax("body", "expected , or } after object value")
			}
			d.ws()
		}
		name, err := d.stringValue("body")
		if err != nil {
			return nil, err
		}
		if string(name) != "records" || seen {
			return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: fmt.Sprintf("unknown or repeated field %q", clipName(name))}
		}
		seen = true
		d.ws()
		if !d.consume(':') {
			return nil, d.syntax("body", "expected : after object key")
		}
		d.ws()
		if err := d.recordArray(maxRecords); err != nil {
			return nil, err
		}
	}
	d.ws()
	if d.i < len(d.b) {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "unexpected data after the JSON value"}
	}
	if d.recs.n == 0 {
		return nil, &FieldError{Field: "body.records", Err: ErrInvalidRequest, Msg: "at least one record is required"}
	}
	return d.recs.records(), nil
}

// recordArray decodes the value of "records": an array (or null).
func (d *produceDecoder) recordArray(maxRecords int) error {
	switch d.peek() {
	case 'n':
		return d.literal("body.records", "", "null")
	case '[':
	default:
		if !isValueStart(d.peek()) {
			return d.syntax("body.records", "invalid character "+quoteChar(d.peek())+" looking for beginning of value")
		}
		return &FieldError{Field: "body.records", Err: ErrInvalidRequest, Msg: "must be an array of records"}
	}
	d.i++
	d.ws()
	if d.peek() == ']' {
		d.i++
		return nil
	}
	for {
		if d.recs.n >= maxRecords {
			return tooManyRecords("body.records", maxRecords)
		}
		if err := d.record(); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case ']':
			d.i++
			return nil
		default:
			return d.syntax("body.records", "expected , or ] after array element")
		}
	}
}

// decodeProduceNDJSON decodes one record object per line; blank lines are
// skipped, a trailing \r is ignored. Fields are named body.line[N] (1-based).
func decodeProduceNDJSON(body []byte, enc string, maxRecords int) ([]ProduceRecord, error) {
	d := newProduceDecoder(body, enc, true)
	for {
		for d.i < len(d.b) && isJSONSpace(d.b[d.i]) {
			if d.b[d.i] == '\n' {
				d.line++
			}
			d.i++
		}
		if d.i == len(d.b) {
			break
		}
		if d.recs.n >= maxRecords {
			return nil, tooManyRecords(d.recordName(), maxRecords)
		}
		start := d.i
		if err := d.record(); err != nil {
			return nil, err
		}
		if bytes.IndexByte(d.b[start:d.i], '\n') >= 0 {
			return nil, &FieldError{Field: d.recordName(), Err: ErrMalformedJSON, Msg: "a record must be one line"}
		}
		for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\r') {
			d.i++
		}
		if d.i < len(d.b) && d.b[d.i] != '\n' {
			return nil, &FieldError{Field: d.recordName(), Err: ErrInvalidRequest, Msg: "unexpected data after the JSON value"}
		}
	}
	if d.recs.n == 0 {
		return nil, &FieldError{Field: "body", Err: ErrInvalidRequest, Msg: "at least one record line is required"}
	}
	return d.recs.records(), nil
}

// recordName names the record being decoded: body.records[i] or
// body.line[N]; built only for errors.
func (d *produceDecoder) recordName() string {
	if d.ndjson {
		return "body.line[" + strconv.Itoa(d.line) + "]"
	}
	return recordField(d.recs.n)
}

// record decodes one record object (null is an empty record, as
// encoding/json leaves a struct alone for null) and adds it.
func (d *produceDecoder) record() error {
	var rec ProduceRecord
	switch d.peek() {
	case 'n':
		if err := d.literal(recField, "", "null"); err != nil {
			return err
		}
		d.recs.add(rec)
		return nil
	case '{':
	default:
		if !isValueStart(d.peek()) {
			return d.syntax(recField, "invalid character "+quoteChar(d.peek())+" looking for beginning of value")
		}
		return &FieldError{Field: d.recordName(), Err: ErrInvalidRequest, Msg: "must be an object"}
	}
	d.i++
	d.hs = d.hs[:0]
	headersSet := false
	for first := true; ; first = false {
		name, done, err := d.objectKey(recField, first)
		if err != nil {
			return err
		}
		if done {
			break
		}
		switch {
		case bytes.EqualFold(name, []byte("value")):
			rec.Value, err = d.bytesValue(".value", true)
		case bytes.EqualFold(name, []byte("key")):
			rec.Key, err = d.bytesValue(".key", false)
		case bytes.EqualFold(name, []byte("headers")):
			d.hs = d.hs[:0]
			headersSet, err = true, d.headers()
		case bytes.EqualFold(name, []byte("partition")):
			var p int64
			var ok bool
			if p, ok, err = d.integer(".partition", 1<<31-1, "must be an integer from 0 to 2147483647"); ok {
				rec.Partition = d.partition(int32(p))
			} else if err == nil {
				rec.Partition = nil
			}
		case bytes.EqualFold(name, []byte("timestamp")):
			var ms int64
			var ok bool
			if ms, ok, err = d.integer(".timestamp", 1<<63-1, "must be a non-negative integer (ms since the epoch)"); ok {
				rec.Timestamp = d.timestamp(time.UnixMilli(ms))
			} else if err == nil {
				rec.Timestamp = nil
			}
		default:
			return &FieldError{Field: d.recordName(), Err: ErrInvalidRequest, Msg: fmt.Sprintf("json: unknown field %q", clipName(name))}
		}
		if err != nil {
			return err
		}
	}
	if headersSet && len(d.hs) > 0 {
		rec.Headers = d.keepHeaders(d.hs)
	}
	d.recs.add(rec)
	return nil
}

// bytesValue decodes a key or value: null, a string (per the encoding) or,
// for a value with the json encoding, any JSON stored compact.
func (d *produceDecoder) bytesValue(sub string, anyJSON bool) ([]byte, error) {
	c := d.peek()
	if c == 'n' {
		return nil, d.literal(recField, sub, "null")
	}
	if c == '"' {
		start, escaped, err := d.scanString()
		if err != nil {
			return nil, err
		}
		lit := d.b[start:d.i]
		if d.enc == EncodingJSON && anyJSON {
			return d.keep(lit), nil // a checked string literal is its own compact form
		}
		b, err := d.text(lit, escaped)
		if err == nil {
			return b, nil
		}
		return nil, d.invalid(sub, err.Error())
	}
	if !(d.enc == EncodingJSON && anyJSON) {
		if !isValueStart(c) {
			return nil, d.syntax(recField, "invalid character "+quoteChar(c)+" looking for beginning of value")
		}
		return nil, d.invalid(sub, "must be a string or null")
	}
	start := d.i
	if err := d.skipValue(); err != nil {
		return nil, err
	}
	dst := d.grow(d.i - start)[:0]
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, d.b[start:d.i]); err != nil {
		return nil, d.syntax(recField, err.Error())
	}
	out := buf.Bytes()
	if len(out) <= cap(dst) { // compacted in place: the arena keeps it
		d.arena = d.arena[:len(d.arena)+len(out)]
		return out[:len(out):len(out)], nil
	}
	return out, nil
}

// text turns a string literal into bytes per the encoding: base64 decoded
// or the text itself, into the arena. Literals with escapes or bytes that
// are not UTF-8 go through encoding/json (which replaces bad bytes).
func (d *produceDecoder) text(lit []byte, escaped bool) ([]byte, error) {
	s := lit[1 : len(lit)-1]
	if escaped || (d.enc != EncodingBase64 && !utf8.Valid(s)) {
		var str string
		if err := json.Unmarshal(lit, &str); err != nil {
			return nil, err
		}
		s = []byte(str)
	}
	if d.enc == EncodingBase64 {
		return d.base64(s)
	}
	return d.keep(s), nil
}

// base64 decodes padded or unpadded standard base64 into the arena.
func (d *produceDecoder) base64(s []byte) ([]byte, error) {
	dst := d.grow(base64.RawStdEncoding.DecodedLen(len(s)) + 2)
	n, err := fastDecodeBase64(base64.StdEncoding, dst, s)
	if err != nil {
		var err2 error
		if n, err2 = fastDecodeBase64(base64.RawStdEncoding, dst, s); err2 != nil {
			return nil, fmt.Errorf("invalid base64: %v", err)
		}
	}
	d.arena = d.arena[:len(d.arena)+n]
	return dst[:n:n], nil
}

// grow returns n bytes of room at the arena's end. A full arena is
// replaced by one twice its size, at most what the rest of the body can
// decode to (plus base64's decode room), so the arenas of a body add up
// to at most about twice its size, and a body refused early allocated
// little.
func (d *produceDecoder) grow(n int) []byte {
	// A nil arena would make an empty string's bytes nil: a null key.
	if cap(d.arena)-len(d.arena) < n || d.arena == nil {
		size := min(max(2*cap(d.arena), 1<<20), len(d.b)-d.i+8)
		d.arena = make([]byte, 0, max(n, size))
	}
	return d.arena[len(d.arena) : len(d.arena)+n]
}

// keep copies b into the arena and returns the copy (never nil).
func (d *produceDecoder) keep(b []byte) []byte {
	dst := d.grow(len(b))
	copy(dst, b)
	d.arena = d.arena[:len(d.arena)+len(b)]
	return dst[:len(b):len(b)]
}

// headers decodes a headers object (or null) into d.hs, in order; a
// repeated name gives a repeated header.
func (d *produceDecoder) headers() error {
	switch d.peek() {
	case 'n':
		return d.literal(recField, ".headers", "null")
	case '{':
	default:
		if !isValueStart(d.peek()) {
			return d.syntax(recField, "invalid character "+quoteChar(d.peek())+" looking for beginning of value")
		}
		return d.invalid(".headers", "must be an object of strings")
	}
	d.i++
	for first := true; ; first = false {
		name, done, err := d.objectKey(recField, first)
		if err != nil || done {
			return err
		}
		var val []byte
		switch d.peek() {
		case '"':
			start, escaped, err := d.scanString()
			if err != nil {
				return err
			}
			if val, err = d.text(d.b[start:d.i], escaped); err != nil {
				return d.invalid(".headers", fmt.Sprintf("header %q: %v", clipName(name), err))
			}
		case 'n':
			if err := d.literal(recField, "", "null"); err != nil {
				return err
			}
		default:
			return d.invalid(".headers", fmt.Sprintf("header %q: must be a string or null", clipName(name)))
		}
		d.hs = append(d.hs, Header{Key: string(name), Value: val})
	}
}

// integer decodes partition or timestamp: null (ok false) or an integer
// in [0, max] ("-0" is 0).
func (d *produceDecoder) integer(sub string, max int64, msg string) (int64, bool, error) {
	if d.peek() == 'n' {
		return 0, false, d.literal(recField, sub, "null")
	}
	start := d.i
	if err := d.skipValue(); err != nil {
		return 0, false, err
	}
	n, ok := ParseNonNegative(d.b[start:d.i], max)
	if !ok {
		return 0, false, d.invalid(sub, msg)
	}
	return n, true, nil
}

// stringValue reads an object key: its text (aliasing the body when it
// has no escapes).
func (d *produceDecoder) stringValue(field string) ([]byte, error) {
	if d.peek() != '"' {
		if d.i == len(d.b) {
			return nil, d.syntax(field, "unexpected end of JSON input")
		}
		return nil, d.syntax(field, "invalid character "+quoteChar(d.peek())+" looking for beginning of object key string")
	}
	start, escaped, err := d.scanString()
	if err != nil {
		return nil, err
	}
	lit := d.b[start:d.i]
	if !escaped && utf8.Valid(lit) {
		return lit[1 : len(lit)-1], nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return nil, d.syntax(field, err.Error())
	}
	return []byte(s), nil
}

// scanString moves past a string literal starting at d.i, checking its
// grammar (no control bytes, valid escapes); it returns where it started
// and whether it holds escapes.
func (d *produceDecoder) scanString() (start int, escaped bool, err error) {
	start = d.i
	b := d.b
	// Fast path for the common literal, no escape: find the quote with
	// IndexByte, then check the bytes before it in one tight loop.
	if q := bytes.IndexByte(b[start+1:], '"'); q >= 0 {
		if span := b[start+1 : start+1+q]; bytes.IndexByte(span, '\\') < 0 && !hasControl(span) {
			d.i = start + q + 2
			return start, false, nil
		}
	}
	for i := start + 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return start, escaped, nil
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					d.i = i
					return start, escaped, d.syntax(recField, "invalid character in \\u escape")
				}
				i += 4
			default:
				d.i = i
				return start, escaped, d.syntax(recField, "invalid character "+quoteChar(b[i])+" in string escape code")
			}
		case c < 0x20:
			d.i = i
			return start, escaped, d.syntax(recField, "invalid character "+quoteChar(c)+" in string literal")
		}
	}
	d.i = len(b)
	return start, escaped, d.syntax(recField, "unexpected end of JSON input")
}

// skipValue moves past one JSON value, checking strings and bracket
// balance only: the caller checks what it keeps (json.Compact, number
// parsing), so a wrong value inside is still refused.
func (d *produceDecoder) skipValue() error {
	depth := 0
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			if _, _, err := d.scanString(); err != nil {
				return err
			}
		case c == '{' || c == '[':
			depth++
			d.i++
		case c == '}' || c == ']':
			if depth == 0 {
				return nil // the enclosing object's end: a scalar ended
			}
			depth--
			d.i++
		case depth == 0 && (c == ',' || isJSONSpace(c)):
			return nil
		default:
			d.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return nil // a whole string, object or array
		}
	}
	if depth > 0 {
		return d.syntax(recField, "unexpected end of JSON input")
	}
	return nil
}

// literal consumes the exact literal word (null), followed by a delimiter.
func (d *produceDecoder) literal(field, sub, word string) error {
	end := d.i + len(word)
	if end > len(d.b) || string(d.b[d.i:end]) != word || (end < len(d.b) && !isDelimiter(d.b[end])) {
		return d.syntax(field+sub, "invalid literal, expected "+word)
	}
	d.i = end
	return nil
}

// keepHeaders moves a record's headers into the headers slab.
func (d *produceDecoder) keepHeaders(hs []Header) []Header {
	if cap(d.hdrs)-len(d.hdrs) < len(hs) {
		d.hdrs = make([]Header, 0, max(len(hs), 256))
	}
	start := len(d.hdrs)
	d.hdrs = append(d.hdrs, hs...)
	clear(hs) // the scratch keeps no record's bytes alive
	return d.hdrs[start:len(d.hdrs):len(d.hdrs)]
}

func (d *produceDecoder) partition(p int32) *int32 {
	if len(d.parts) == cap(d.parts) {
		d.parts = make([]int32, 0, 256)
	}
	d.parts = append(d.parts, p)
	return &d.parts[len(d.parts)-1]
}

func (d *produceDecoder) timestamp(t time.Time) *time.Time {
	if len(d.times) == cap(d.times) {
		d.times = make([]time.Time, 0, 64)
	}
	d.times = append(d.times, t)
	return &d.times[len(d.times)-1]
}

// objectKey reads the next key of an object whose '{' is consumed: the
// comma before it (none before the first), the key and the colon after it,
// and the white space up to its value. done: the object's '}' came instead
// (consumed). field names the object in errors.
func (d *produceDecoder) objectKey(field string, first bool) (name []byte, done bool, err error) {
	d.ws()
	if d.peek() == '}' {
		d.i++
		return nil, true, nil
	}
	if !first {
		if !d.consume(',') {
			return nil, false, d.syntax(field, "expected , or } after object value")
		}
		d.ws()
	}
	if name, err = d.stringValue(field); err != nil {
		return nil, false, err
	}
	d.ws()
	if !d.consume(':') {
		return nil, false, d.syntax(field, "expected : after object key")
	}
	d.ws()
	return name, false, nil
}

func (d *produceDecoder) ws() {
	for d.i < len(d.b) && isJSONSpace(d.b[d.i]) {
		d.i++
	}
}

func (d *produceDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *produceDecoder) consume(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// recField stands for the record being decoded in a field name passed
// down (recField+".value"): the name is built only for an error.
const recField = "\x00"

func (d *produceDecoder) fieldName(field string) string {
	if strings.HasPrefix(field, recField) {
		return d.recordName() + field[len(recField):]
	}
	return field
}

// syntax is a malformed-JSON error at the current byte.
func (d *produceDecoder) syntax(field, msg string) error {
	field = d.fieldName(field)
	if d.i >= len(d.b) && msg != "unexpected end of JSON input" {
		msg = "unexpected end of JSON input"
	}
	return &FieldError{Field: field, Err: ErrMalformedJSON, Msg: fmt.Sprintf("%s (byte %d)", msg, d.i)}
}

// invalid is a well-formed field of the wrong kind (".key", ".headers").
func (d *produceDecoder) invalid(sub, msg string) error {
	return &FieldError{Field: d.recordName() + sub, Err: ErrInvalidRequest, Msg: msg}
}

// hasControl reports whether s holds a byte below 0x20 (not allowed raw in
// a JSON string), eight bytes at a time: (x - 0x20 in every byte) & ^x has
// a byte's top bit set exactly when that byte is below 0x20 (the classic
// "has a byte less than n" test, exact for n <= 128).
func hasControl(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		x := binary.LittleEndian.Uint64(s)
		if (x-0x20*ones)&^x&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDelimiter(c byte) bool {
	return isJSONSpace(c) || c == ',' || c == '}' || c == ']'
}

func isValueStart(c byte) bool {
	return c == '{' || c == '[' || c == '"' || c == '-' || ('0' <= c && c <= '9') || c == 't' || c == 'f' || c == 'n'
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(c))
	return "'" + s[1:len(s)-1] + "'"
}

// maxNameInMessage bounds a field or header name quoted in an error
// message: the name is the client's, of any length, and quoting it
// (invalid UTF-8 becomes U+FFFD, three bytes for one) made the message and
// its copies many times the body (FuzzDecodeProduceAlloc: a 3,836-byte
// body, 102,696 bytes allocated).
const maxNameInMessage = 64

// clipName returns name for an error message: at most maxNameInMessage
// bytes of it, cut at a rune boundary, "..." marking a cut.
func clipName(name []byte) string {
	if len(name) <= maxNameInMessage {
		return string(name)
	}
	cut := maxNameInMessage
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return string(name[:cut]) + "..."
}
