// Package hwcheckpoint is the codec of a broker's high-watermark
// checkpoint: one file per data directory holding the high watermark of
// every partition replica there whose mark is known, as Kafka's
// replication-offset-checkpoint does per log directory (server/broker
// writes it on a timer and at close, hwcheckpoint.go there). The format is
// text:
//
//	runnel-high-watermarks 1
//	topic <name> <topic id: 32 hex digits> <partition lines that follow>
//	<partition> <high watermark>
//	...
//	end <CRC-32C (Castagnoli) of every byte before this line, 8 hex digits>
//
// A topic line is followed by exactly as many partition lines as it says,
// in increasing partition order; topic names are runnel topic names (no
// white space). Fields are separated by spaces (Encode writes one); the
// decoder splits lines as the state file's does (internal/textline: any
// run of spaces, tabs or "\r"). The decoder reads untrusted bytes from disk: what it
// allocates is bounded by a small multiple of its input (FuzzDecode checks
// alloctest's bound). No goroutines, no state: safe for concurrent use.
package hwcheckpoint

import (
	"bytes"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/runnel/runnel/internal/textline"
)

// Checkpoint is the high watermarks of one data directory, by topic.
type Checkpoint []Topic

// Topic is one topic's partitions in a checkpoint. ID tells a topic from
// an older one of the same name: a mark is never given to another topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []Partition // in increasing Index order
}

// Partition is one partition's high watermark.
type Partition struct {
	Index         int32
	HighWatermark int64
}

const header = "runnel-high-watermarks 1\n"

// castagnoli is the CRC-32C table of the file's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the file's bytes. Topics are written in the order given.
func (c Checkpoint) Encode() []byte { return c.AppendEncode(nil) }

// AppendEncode appends the file's bytes to b and returns it: a writer
// that keeps b between writes encodes without allocating (issue 19: a
// write of 300,000 marks made a new buffer of ~5 MB and a string for
// each topic line every round). The CRC covers what it appends only.
func (c Checkpoint) AppendEncode(b []byte) []byte {
	n := len(header) + 16
	for _, t := range c {
		n += len(t.Name) + 48 + 16*len(t.Partitions)
	}
	b = slices.Grow(b, n)
	start := len(b)
	b = append(b, header...)
	for _, t := range c {
		b = append(b, "topic "...)
		b = append(b, t.Name...)
		b = append(b, ' ')
		b = hex.AppendEncode(b, t.ID[:])
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(t.Partitions)), 10)
		b = append(b, '\n')
		for _, p := range t.Partitions {
			b = strconv.AppendInt(b, int64(p.Index), 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, p.HighWatermark, 10)
			b = append(b, '\n')
		}
	}
	sum := crc32.Checksum(b[start:], castagnoli)
	b = append(b, "end "...)
	b = hex.AppendEncode(b, []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	return append(b, '\n')
}

// ErrMalformed is the decoder's error: the file is not one Encode wrote
// whole (torn, corrupt, or of an unknown version).
var ErrMalformed = errors.New("hwcheckpoint: malformed high-watermark checkpoint")

// minPartitionLine is the shortest partition line ("0 0\n"): a topic line
// claiming more partitions than the bytes left could hold is refused
// before its slice is allocated.
const minPartitionLine = 4

// Decode parses a checkpoint file. The bytes come from disk and are not
// trusted: what it allocates is bounded by a small multiple of len(b).
func Decode(b []byte) (Checkpoint, error) {
	body, sum, ok := cutTrailer(b)
	if !ok || crc32.Checksum(body, castagnoli) != sum || !bytes.HasPrefix(body, []byte(header)) {
		return nil, ErrMalformed
	}
	text := string(body[len(header):])
	var c Checkpoint
	for text != "" {
		ln, rest, _ := strings.Cut(text, "\n")
		var f [5]string
		if n, ok := textline.Fields(ln, f[:]); !ok || n != 4 || f[0] != "topic" {
			return nil, ErrMalformed
		}
		t := Topic{Name: f[1]}
		if len(f[2]) != 2*len(t.ID) {
			return nil, ErrMalformed
		}
		if _, err := hex.Decode(t.ID[:], []byte(f[2])); err != nil {
			return nil, ErrMalformed
		}
		count, err := strconv.Atoi(f[3])
		if err != nil || count < 0 || count > len(rest)/minPartitionLine {
			return nil, ErrMalformed
		}
		t.Partitions = make([]Partition, 0, count)
		for range count {
			ln, rest, _ = strings.Cut(rest, "\n")
			var pf [3]string
			if n, ok := textline.Fields(ln, pf[:]); !ok || n != 2 {
				return nil, ErrMalformed
			}
			idx, err1 := strconv.ParseInt(pf[0], 10, 32)
			hw, err2 := strconv.ParseInt(pf[1], 10, 64)
			if err1 != nil || err2 != nil || idx < 0 || hw < 0 || idx > math.MaxInt32 {
				return nil, ErrMalformed
			}
			if k := len(t.Partitions); k > 0 && int32(idx) <= t.Partitions[k-1].Index {
				return nil, ErrMalformed
			}
			t.Partitions = append(t.Partitions, Partition{Index: int32(idx), HighWatermark: hw})
		}
		c = append(c, t)
		text = rest
	}
	return c, nil
}

// cutTrailer splits b into what precedes its last line, "end <crc>\n",
// and the CRC that line holds.
func cutTrailer(b []byte) (body []byte, sum uint32, ok bool) {
	const trailer = len("end 01234567\n")
	if len(b) < trailer || b[len(b)-1] != '\n' {
		return nil, 0, false
	}
	body, last := b[:len(b)-trailer], b[len(b)-trailer:]
	if !bytes.HasPrefix(last, []byte("end ")) || (len(body) > 0 && body[len(body)-1] != '\n') {
		return nil, 0, false
	}
	var raw [4]byte
	if _, err := hex.Decode(raw[:], last[4:12]); err != nil {
		return nil, 0, false
	}
	return body, uint32(raw[0])<<24 | uint32(raw[1])<<16 | uint32(raw[2])<<8 | uint32(raw[3]), true
}
