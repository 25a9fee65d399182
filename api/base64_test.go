package api

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// appendBase64 writes what encoding/base64 writes, for every length
// around the 6-byte steps and the 8-byte reads, appended to any prefix.
func TestAppendBase64MatchesStd(t *testing.T) {
	src := make([]byte, 100)
	for i := range src {
		src[i] = byte(i*151 + 7)
	}
	for n := range len(src) {
		want := "pre" + base64.StdEncoding.EncodeToString(src[:n])
		if got := appendBase64([]byte("pre"), src[:n]); string(got) != want {
			t.Fatalf("%d bytes: got %s, want %s", n, got, want)
		}
	}
}

// FuzzAppendBase64: appendBase64 equals encoding/base64 on any input,
// whatever room dst has.
func FuzzAppendBase64(f *testing.F) {
	f.Add([]byte{}, []byte("abcdefgh"), uint8(0))
	f.Add([]byte{0xff, 0xfe, 0xfd, 0, 1, 2, 3, 4, 5, 6, 7}, []byte{}, uint8(3))
	f.Fuzz(func(t *testing.T, src, prefix []byte, room uint8) {
		dst := make([]byte, len(prefix), len(prefix)+int(room))
		copy(dst, prefix)
		got := appendBase64(dst, src)
		want := base64.StdEncoding.AppendEncode(append([]byte(nil), prefix...), src)
		if !bytes.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// BenchmarkAppendBase64 against encoding/base64's AppendEncode on a 1 KiB
// value (what the consume benchmark stores).
func BenchmarkAppendBase64(b *testing.B) {
	src := make([]byte, 1024)
	for i := range src {
		src[i] = byte(i*131 + i>>3)
	}
	dst := make([]byte, 0, 2048)
	b.Run("appendBase64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			dst = appendBase64(dst[:0], src)
		}
	})
	b.Run("encoding-base64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			dst = base64.StdEncoding.AppendEncode(dst[:0], src)
		}
	})
}

// FuzzDecodeBase64: fastDecodeBase64 decodes what encoding/base64 decodes
// and fails where it fails, padded or not, whatever the input.
func FuzzDecodeBase64(f *testing.F) {
	f.Add("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", false)
	f.Add("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", true)
	f.Add("QUJDREVG\nR0hJSktMTU5PUFFSU1RVVldYWVo=", false)
	f.Add("QUJD*EVGR0hJSktM", false)
	f.Fuzz(func(t *testing.T, s string, raw bool) {
		enc := base64.StdEncoding
		if raw {
			enc = base64.RawStdEncoding
		}
		want := make([]byte, enc.DecodedLen(len(s))+8)
		wn, werr := enc.Decode(want, []byte(s))
		got := make([]byte, enc.DecodedLen(len(s))+8)
		gn, gerr := fastDecodeBase64(enc, got, []byte(s))
		if (werr == nil) != (gerr == nil) || (werr == nil && !bytes.Equal(got[:gn], want[:wn])) {
			t.Fatalf("%q: got %d %v %x, want %d %v %x", s, gn, gerr, got[:gn], wn, werr, want[:wn])
		}
	})
}

func BenchmarkDecodeBase64(b *testing.B) {
	src := make([]byte, 1024)
	for i := range src {
		src[i] = byte(i*131 + i>>3)
	}
	s := []byte(base64.StdEncoding.EncodeToString(src))
	dst := make([]byte, 1024+8)
	b.Run("fastDecodeBase64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			_, _ = fastDecodeBase64(base64.StdEncoding, dst, s)
		}
	})
	b.Run("encoding-base64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			_, _ = base64.StdEncoding.Decode(dst, s)
		}
	})
}
