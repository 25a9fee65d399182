package hwcheckpoint

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"
)

func sample() Checkpoint {
	return Checkpoint{
		{Name: "orders", ID: [16]byte{1, 2, 3}, Partitions: []Partition{{0, 10}, {1, 0}, {7, 1 << 40}}},
		{Name: "__consumer_offsets", ID: [16]byte{15: 0xff}, Partitions: []Partition{{2, 3}}},
		{Name: "empty", ID: [16]byte{9}},
	}
}

// TestRoundTrip: what Encode writes, Decode reads back as it was.
func TestRoundTrip(t *testing.T) {
	for _, c := range []Checkpoint{nil, sample()} {
		got, err := Decode(c.Encode())
		if err != nil {
			t.Fatalf("%q: %v", c.Encode(), err)
		}
		if len(c) == 0 && len(got) == 0 {
			continue
		}
		for i := range c {
			if len(c[i].Partitions) == 0 {
				c[i].Partitions = []Partition{}
			}
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
	}
}

// TestDecodeRefusesDamage: every prefix of a checkpoint (a torn write),
// every single flipped bit, and files of another version or with broken
// lines under a correct CRC are refused, never read as other marks.
func TestDecodeRefusesDamage(t *testing.T) {
	good := sample().Encode()
	for n := range len(good) {
		if c, err := Decode(good[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded as %+v", n, c)
		}
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if c, err := Decode(b); err == nil && !reflect.DeepEqual(c, mustDecode(t, good)) {
			t.Fatalf("bit %d flipped decoded as %+v", i, c)
		}
	}
	for _, body := range []string{
		"runnel-high-watermarks 2\n",
		"runnel-high-watermarks 1\ntopic a 01 1\n0 1\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 2\n0 1\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 2\n1 1\n0 1\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 1\n0 -1\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 1\n2147483648 1\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 1\n0 1 2\n",
		"runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 99999999999\n0 1\n",
		"runnel-high-watermarks 1\n0 1\n",
	} {
		b := withTrailer(body)
		if c, err := Decode(b); err == nil {
			t.Errorf("%q decoded as %+v", b, c)
		}
	}
}

func mustDecode(t *testing.T, b []byte) Checkpoint {
	t.Helper()
	c, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withTrailer ends body with its correct "end" line.
func withTrailer(body string) []byte {
	return fmt.Appendf([]byte(body), "end %08x\n", crc32.Checksum([]byte(body), castagnoli))
}

// FuzzDecode feeds arbitrary bytes to the decoder: what it accepts
// round-trips, and what it allocates stays within alloctest's bound of
// the input (the bytes come from disk and are not trusted).
func FuzzDecode(f *testing.F) {
	f.Add(sample().Encode())
	f.Add(Checkpoint(nil).Encode())
	f.Add([]byte("runnel-high-watermarks 1\ntopic a 0102030405060708090a0b0c0d0e0f10 99999\n0 1\n"))
	f.Add([]byte("runnel-high-watermarks 1\n" + strings.Repeat("topic a 0102030405060708090a0b0c0d0e0f10 0\n", 50)))
	f.Fuzz(func(t *testing.T, b []byte) {
		// As read, and with its checksum made right, so that the lines
		// themselves are fuzzed past the CRC.
		for _, in := range [][]byte{b, withTrailer(string(b))} {
			var c Checkpoint
			var err error
			if n := alloctest.Bytes(func() { c, err = Decode(in) }); n > alloctest.Limit(len(in), 0) {
				t.Fatalf("Decode allocated %d bytes for %d", n, len(in))
			}
			if err != nil {
				continue
			}
			c2, err := Decode(c.Encode())
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("does not round-trip: %+v %+v %v", c, c2, err)
			}
		}
	})
}

// encodeFmt is the format written out with fmt, line by line as the
// package doc states it: the reference AppendEncode must match byte for
// byte (the file's format and CRC do not change with the encoder).
func encodeFmt(c Checkpoint) []byte {
	var b bytes.Buffer
	b.WriteString("runnel-high-watermarks 1\n")
	for _, t := range c {
		fmt.Fprintf(&b, "topic %s %x %d\n", t.Name, t.ID[:], len(t.Partitions))
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, "%d %d\n", p.Index, p.HighWatermark)
		}
	}
	fmt.Fprintf(&b, "end %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// AppendEncode writes what the format says after whatever the buffer
// holds, the CRC over its own bytes only, and into a buffer kept from
// the write before without allocating.
func TestAppendEncodeReusesItsBuffer(t *testing.T) {
	big := Checkpoint{{Name: "scale-00001", ID: [16]byte{0xab, 15: 0xcd}}}
	for i := range 5000 {
		big[0].Partitions = append(big[0].Partitions, Partition{int32(i), int64(i) << 33})
	}
	var buf []byte
	for _, c := range []Checkpoint{nil, sample(), big, sample()} {
		want := encodeFmt(c)
		if got := c.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode:\n%q\nwant\n%q", got, want)
		}
		buf = c.AppendEncode(buf[:0])
		if !bytes.Equal(buf, want) {
			t.Fatalf("AppendEncode into a used buffer:\n%q\nwant\n%q", buf, want)
		}
		if got := c.AppendEncode([]byte("before")); string(got[:6]) != "before" || !bytes.Equal(got[6:], want) {
			t.Fatalf("AppendEncode after other bytes:\n%q", got)
		}
	}
	buf = big.AppendEncode(buf[:0])
	if n := testing.AllocsPerRun(10, func() { buf = big.AppendEncode(buf[:0]) }); n != 0 {
		t.Fatalf("AppendEncode into a buffer large enough allocates %v times, want 0", n)
	}
}
