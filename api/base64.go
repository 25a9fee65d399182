package api

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
)

// Base64 of consumed keys, values and headers, written straight into the
// response buffer. encoding/base64 turns 3 bytes into 4 with four table
// look-ups and four byte stores; on a 1 KiB-value consume that was about
// 40% of the node's CPU. appendBase64 turns 6 bytes into 8 with four
// look-ups of 12 bits each (a 4,096-entry table of character pairs, 8 KiB,
// which stays in L1) and one 8-byte store: about 2.5x encoding/base64's
// speed, same output (standard alphabet, padded), which
// FuzzAppendBase64 holds it to. The tail (under 8 bytes left) goes
// through encoding/base64, which also writes the padding.

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// base64Pairs[v] is the two characters of the 12 bits v, first one in the
// low byte (stored little-endian, it comes first).
var base64Pairs = func() (t [4096]uint16) {
	for i := range t {
		t[i] = uint16(base64Alphabet[i>>6]) | uint16(base64Alphabet[i&63])<<8
	}
	return t
}()

// appendBase64 appends the standard padded base64 of src to dst.
func appendBase64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	// Each step reads 8 bytes and encodes the first 6 of them.
	for len(src) >= 8 && len(out) >= 8 {
		v := binary.BigEndian.Uint64(src)
		binary.LittleEndian.PutUint64(out, uint64(base64Pairs[v>>52])|
			uint64(base64Pairs[v>>40&0xfff])<<16|
			uint64(base64Pairs[v>>28&0xfff])<<32|
			uint64(base64Pairs[v>>16&0xfff])<<48)
		src, out = src[6:], out[8:]
	}
	base64.StdEncoding.Encode(out, src)
	return dst[:len(dst)+n]
}

// Produce bodies' base64 is decoded the same way round: 8 characters to
// 6 bytes with four look-ups of two characters each (base64PairValues, a
// 65,536-entry table of 12-bit values, 128 KiB) and one 8-byte store,
// about 1.6-2.5x encoding/base64's decoder. Anything else (padding, line
// breaks, a bad character, the last few characters) is left to
// encoding/base64 from there on, so results and errors are its own:
// FuzzDecodeBase64 holds it to that.

// base64PairValues[a | b<<8] is the 12 bits of the characters a, b, or
// 0xffff when either is not in the standard alphabet.
var base64PairValues = func() *[1 << 16]uint16 {
	var val [256]int
	for i := range val {
		val[i] = -1
	}
	for i := range len(base64Alphabet) {
		val[base64Alphabet[i]] = i
	}
	t := new([1 << 16]uint16)
	for i := range t {
		a, b := val[i&0xff], val[i>>8]
		t[i] = 0xffff
		if a >= 0 && b >= 0 {
			t[i] = uint16(a<<6 | b)
		}
	}
	return t
}()

// fastDecodeBase64 is enc.Decode (enc: base64.StdEncoding or
// base64.RawStdEncoding) with the fast start described above; dst needs
// enc.DecodedLen(len(src)) bytes.
func fastDecodeBase64(enc *base64.Encoding, dst, src []byte) (int, error) {
	t := base64PairValues
	n := 0
	for len(src) >= 8 && len(dst)-n >= 8 {
		v := binary.LittleEndian.Uint64(src)
		a, b, c, d := t[uint16(v)], t[uint16(v>>16)], t[uint16(v>>32)], t[uint16(v>>48)]
		if (a|b|c|d)&0xf000 != 0 {
			break
		}
		binary.BigEndian.PutUint64(dst[n:], uint64(a)<<52|uint64(b)<<40|uint64(c)<<28|uint64(d)<<16)
		n += 6
		src = src[8:]
	}
	m, err := enc.Decode(dst[n:], src)
	return n + m, err
}
