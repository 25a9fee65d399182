package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendConsumed appends one record of a consume response as JSON (schema
// ConsumedRecord) to dst, writing keys, values and headers straight into
// it: base64 is encoded in place, text escaped in place, JSON values
// compacted in place, with no intermediate record struct. It renders what
// encoding/json renders of encodeRecord's ConsumedJSON (same fields, same
// order, headers sorted by name with the last of a repeated name winning),
// minus encoding/json's HTML escaping of <, > and &, which JSON does not
// need; TestAppendConsumedMatchesMarshal holds it to that.
func AppendConsumed(dst []byte, r ConsumedRecord, enc string) []byte {
	dst = append(dst, `{"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	dst = append(dst, `,"key":`...)
	dst, keyEnc := appendTextOrBase64(dst, r.Key, enc)
	dst = append(dst, `,"value":`...)
	dst, valueEnc := appendValue(dst, r.Value, enc)
	headersEnc := EncodingString
	if enc == EncodingBase64 || !headersUTF8(r.Headers) {
		headersEnc = EncodingBase64
	}
	dst = append(dst, `,"headers":`...)
	dst = appendHeaderObject(dst, r.Headers, headersEnc)
	dst = append(dst, `,"key_encoding":"`...)
	dst = append(dst, keyEnc...)
	dst = append(dst, `","value_encoding":"`...)
	dst = append(dst, valueEnc...)
	dst = append(dst, `","headers_encoding":"`...)
	dst = append(dst, headersEnc...)
	dst = append(dst, `","header_list":`...)
	dst = appendHeaderList(dst, r.Headers, enc)
	if r.Transactional {
		dst = append(dst, `,"transactional":true`...)
	}
	if c := r.Control; c != nil {
		dst = appendControl(dst, c)
	}
	return append(dst, '}')
}

// appendControl writes a marker's "control" object (ControlMarker's JSON).
func appendControl(dst []byte, c *ControlMarker) []byte {
	dst = append(dst, `,"control":{"type":`...)
	dst = appendJSONString(dst, []byte(c.Type))
	dst = append(dst, `,"producer_id":`...)
	dst = strconv.AppendInt(dst, c.ProducerID, 10)
	dst = append(dst, `,"producer_epoch":`...)
	dst = strconv.AppendInt(dst, int64(c.ProducerEpoch), 10)
	dst = append(dst, `,"coordinator_epoch":`...)
	dst = strconv.AppendInt(dst, int64(c.CoordinatorEpoch), 10)
	return append(dst, '}')
}

// appendTextOrBase64 is textOrBase64 written into dst.
func appendTextOrBase64(dst, b []byte, enc string) ([]byte, string) {
	e := EncodingBase64
	if enc != EncodingBase64 && utf8.Valid(b) {
		e = EncodingString
	}
	if b == nil {
		return append(dst, "null"...), e
	}
	if e == EncodingString {
		return appendJSONString(dst, b), e
	}
	dst = append(dst, '"')
	dst = appendBase64(dst, b)
	return append(dst, '"'), e
}

// appendValue is encodeValue written into dst: a JSON value compacted in
// place (rolled back when it is not JSON), else text or base64.
func appendValue(dst, b []byte, enc string) ([]byte, string) {
	if b == nil {
		return append(dst, "null"...), enc
	}
	if enc == EncodingJSON && utf8.Valid(b) {
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, b); err == nil {
			return buf.Bytes(), EncodingJSON
		}
		dst = buf.Bytes()[:len(dst)] // Compact may have grown it
	}
	return appendTextOrBase64(dst, b, enc)
}

// appendHeaderObject renders the lossy headers object: names sorted, the
// last of a repeated name winning (what encoding/json makes of the map).
func appendHeaderObject(dst []byte, hs []Header, enc string) []byte {
	if len(hs) == 0 {
		return append(dst, "{}"...)
	}
	idx := make([]int, 0, len(hs))
	for i := range hs {
		idx = append(idx, i)
	}
	// Stable: among equal names the last index stays last.
	slices.SortStableFunc(idx, func(a, b int) int { return cmpString(hs[a].Key, hs[b].Key) })
	dst = append(dst, '{')
	first := true
	for n, i := range idx {
		if n+1 < len(idx) && hs[idx[n+1]].Key == hs[i].Key {
			continue // a later header of the same name wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, []byte(hs[i].Key))
		dst = append(dst, ':')
		switch {
		case hs[i].Value == nil:
			dst = append(dst, "null"...)
		case enc == EncodingBase64:
			dst = append(dst, '"')
			dst = appendBase64(dst, hs[i].Value)
			dst = append(dst, '"')
		default:
			dst = appendJSONString(dst, hs[i].Value)
		}
	}
	return append(dst, '}')
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendHeaderList renders header_list (encodeHeaders' rules).
func appendHeaderList(dst []byte, hs []Header, enc string) []byte {
	dst = append(dst, '[')
	for i, h := range hs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		keyEnc := EncodingString
		if utf8.ValidString(h.Key) {
			dst = appendJSONString(dst, []byte(h.Key))
		} else {
			keyEnc = EncodingBase64
			dst = append(dst, '"')
			dst = appendBase64(dst, []byte(h.Key))
			dst = append(dst, '"')
		}
		dst = append(dst, `,"value":`...)
		var valueEnc string
		dst, valueEnc = appendTextOrBase64(dst, h.Value, enc)
		dst = append(dst, `,"key_encoding":"`...)
		dst = append(dst, keyEnc...)
		dst = append(dst, `","value_encoding":"`...)
		dst = append(dst, valueEnc...)
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s (valid UTF-8, or replaced by U+FFFD as
// encoding/json does) as a JSON string literal, copying runs that need no
// escape in one append.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
