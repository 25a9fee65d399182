package segments

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// buildCodecBatch is buildBatch with the record section compressed.
func buildCodecBatch(t testing.TB, recs []rec, codec int, xerialFraming bool) []byte {
	t.Helper()
	b := buildBatch(recs)
	if codec == recordbatch.CodecNone {
		return b
	}
	payload, err := recordbatch.Compress(codec, b[recordbatch.HeaderLen:], xerialFraming)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(b[:recordbatch.HeaderLen]), payload...)
	binary.BigEndian.PutUint16(out[recordbatch.AttrAt:], uint16(codec))
	binary.BigEndian.PutUint32(out[recordbatch.LengthAt:], uint32(len(out)-recordbatch.PrefixLen))
	recordbatch.SetCRC(out)
	return out
}

var codecCases = []struct {
	name   string
	codec  int
	xerial bool
}{
	{"none", recordbatch.CodecNone, false}, {"gzip", recordbatch.CodecGzip, false}, {"snappy", recordbatch.CodecSnappy, false},
	{"snappy-xerial", recordbatch.CodecSnappy, true}, {"lz4", recordbatch.CodecLZ4, false}, {"zstd", recordbatch.CodecZstd, false},
}

// TestCompactionCodecs compacts logs of batches in every codec: the latest
// value of each key survives, old tombstones go, recent ones stay, and the
// rewritten batches keep their codec and offsets.
func TestCompactionCodecs(t *testing.T) {
	for _, cc := range codecCases {
		t.Run(cc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CleanupPolicy = "compact"
			cfg.DeleteRetentionMs = 1000
			now := int64(1_000_000)
			l := mustOpen(t, "/t", cfg, Options{FS: vfs.NewMemFS(), Now: func() time.Time { return time.UnixMilli(now) }})
			defer l.Close()
			// Keys k0..k4 written 4 times; k3 ends with an old tombstone,
			// k4 with a recent one.
			for round := 0; round < 4; round++ {
				var recs []rec
				for k := 0; k < 5; k++ {
					r := rec{key: []byte(fmt.Sprint("k", k)), value: []byte(fmt.Sprintf("v%d%d", round, k)), ts: now - 5000 + int64(round*10+k)}
					if round == 3 && k == 3 {
						r.value = nil
					}
					if round == 3 && k == 4 {
						r.value, r.ts = nil, now-10
					}
					recs = append(recs, r)
				}
				mustAppend(t, l, buildCodecBatch(t, recs, cc.codec, cc.xerial), 0)
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if err := l.Maintain(time.UnixMilli(now)); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			b := readAll(t, l, 0, 1<<20)
			for len(b) > 0 {
				h, err := recordbatch.Check(b, 0, recordbatch.CountCompacted)
				if err != nil {
					t.Fatal(err)
				}
				if h.Codec() != cc.codec {
					t.Fatalf("codec %d became %d", cc.codec, h.Codec())
				}
				err = recordbatch.ForEachRecord(h, b[:h.Size], func(r recordbatch.RawRecord) bool {
					v := string(r.Value)
					if r.Value == nil {
						v = "<nil>"
					}
					got[fmt.Sprintf("%s@%d", r.Key, r.Offset)] = v
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				b = b[h.Size:]
			}
			want := map[string]string{"k0@15": "v30", "k1@16": "v31", "k2@17": "v32", "k4@19": "<nil>"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after compaction %v, want %v", got, want)
			}
			if l.EndOffset() != 20 {
				t.Fatalf("end offset %d", l.EndOffset())
			}
			checkIndexes(t, l)
		})
	}
}

// TestOffsetForTimestampCompressed finds records inside compressed batches.
func TestOffsetForTimestampCompressed(t *testing.T) {
	for _, cc := range codecCases {
		l := mustOpen(t, "/t", DefaultConfig(), Options{FS: vfs.NewMemFS()})
		for i := 0; i < 10; i++ {
			recs := []rec{{key: []byte("a"), value: []byte("x"), ts: int64(100*i + 10)}, {key: []byte("b"), value: []byte("y"), ts: int64(100*i + 20)}}
			mustAppend(t, l, buildCodecBatch(t, recs, cc.codec, cc.xerial), 0)
		}
		off, ts, ok, err := l.OffsetForTimestamp(515)
		if err != nil || !ok || off != 11 || ts != 520 {
			t.Errorf("%s: got %d %d %v %v, want 11 520", cc.name, off, ts, ok, err)
		}
		l.Close()
	}
}

// TestAppendReplicated copies a leader's batches to a follower byte for
// byte, with the leader's offsets and epochs.
func TestAppendReplicated(t *testing.T) {
	leader := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer leader.Close()
	follower := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer follower.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, leader, valueBatch(3, 20, int64(i)), int32(i/4))
	}
	b := readAll(t, leader, 0, 1<<20)
	if _, err := follower.AppendReplicated(bytes.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, follower, 0, 1<<20); !bytes.Equal(got, b) {
		t.Fatal("follower bytes differ from the leader's")
	}
	for e := int32(0); e < 4; e++ {
		le, lo, _ := leader.EndOffsetForEpoch(e)
		fe, fo, _ := follower.EndOffsetForEpoch(e)
		if le != fe || lo != fo {
			t.Fatalf("epoch %d: leader %d/%d follower %d/%d", e, le, lo, fe, fo)
		}
	}
	if _, err := follower.AppendReplicated(b[:len(b)/2+100]); !errors.Is(err, recordbatch.ErrCorruptBatch) {
		t.Fatalf("torn replicated append: %v", err)
	}
	first := b[:recordbatch.ParseHeader(b).Size]
	if _, err := follower.AppendReplicated(bytes.Clone(first)); !errors.Is(err, recordbatch.ErrCorruptBatch) {
		t.Fatalf("replicated append below the end offset: %v", err)
	}
}

// TestTimeDrivenWork: segment.ms rolls and flush.ms fsyncs through Maintain.
func TestTimeDrivenWork(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentMs = 1000
	cfg.FlushMs = 500
	now := time.UnixMilli(5_000_000)
	clock := func() time.Time { return now }
	l := mustOpen(t, t.TempDir(), cfg, Options{Now: clock})
	defer l.Close()
	mustAppend(t, l, valueBatch(2, 10, 1), 0)
	if err := l.Maintain(now.Add(400 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != 0 || l.Segments() != 1 {
		t.Fatalf("too early: recovery point %d, %d segments", l.RecoveryPoint(), l.Segments())
	}
	if err := l.Maintain(now.Add(600 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != 2 {
		t.Fatalf("flush.ms did not flush: recovery point %d", l.RecoveryPoint())
	}
	if err := l.Maintain(now.Add(1100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 2 {
		t.Fatalf("segment.ms did not roll: %d segments", l.Segments())
	}
	// An append after segment.ms on a non-empty segment rolls too.
	mustAppend(t, l, valueBatch(1, 10, 1), 0)
	now = now.Add(2 * time.Second)
	mustAppend(t, l, valueBatch(1, 10, 1), 0)
	if l.Segments() != 3 {
		t.Fatalf("append after segment.ms did not roll: %d segments", l.Segments())
	}
}

func TestConfigNormalize(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero gets defaults", Config{}, true},
		{"compact,delete", Config{CleanupPolicy: "compact,delete"}, true},
		{"bad policy", Config{CleanupPolicy: "shred"}, false},
		{"tiny segment", Config{SegmentBytes: 10}, false},
	}
	for _, tt := range tests {
		c, err := tt.cfg.normalized()
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
		if err == nil && (c.SegmentBytes <= 0 || c.MaxMessageBytes <= 0 || c.FlushMessages <= 0) {
			t.Errorf("%s: not normalized: %+v", tt.name, c)
		}
	}
}

// TestReset restarts a log at an offset past its end, as a follower behind
// the leader's log start offset does.
func TestReset(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, DefaultConfig(), Options{})
	mustAppend(t, l, valueBatch(2, 10, 1), 3)
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 1000 || l.EndOffset() != 1000 || l.Size() != 0 {
		t.Fatalf("after reset [%d, %d) %d bytes", l.StartOffset(), l.EndOffset(), l.Size())
	}
	if e, _, _ := l.EndOffsetForEpoch(3); e != -1 {
		t.Fatalf("epochs survived the reset: %d", e)
	}
	if info := mustAppend(t, l, valueBatch(1, 10, 1), 4); info.BaseOffset != 1000 {
		t.Fatalf("append at %d", info.BaseOffset)
	}
	l.Close()
	l = mustOpen(t, dir, DefaultConfig(), Options{})
	defer l.Close()
	if l.StartOffset() != 1000 || l.EndOffset() != 1001 {
		t.Fatalf("after reopen [%d, %d)", l.StartOffset(), l.EndOffset())
	}
}

// TestMaxTimestamp compares MaxTimestamp and OffsetForTimestamp with a scan
// of every record, on logs with random (unordered) timestamps, compressed
// batches, several segments and a moved start offset.
func TestMaxTimestamp(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := DefaultConfig()
		cfg.SegmentBytes = 600
		l := mustOpen(t, "/mt", cfg, Options{FS: vfs.NewMemFS()})
		if _, _, ok, _ := l.MaxTimestamp(); ok {
			t.Fatal("empty log has a max timestamp")
		}
		type r struct{ off, ts int64 }
		var all []r
		for i := 0; i < 30; i++ {
			n := 1 + rng.IntN(3)
			recs := make([]rec, n)
			for j := range recs {
				recs[j] = rec{key: []byte("k"), value: []byte("v"), ts: rng.Int64N(50)}
			}
			info := mustAppend(t, l, buildCodecBatch(t, recs, rng.IntN(5), false), 0)
			for j, x := range recs {
				all = append(all, r{info.BaseOffset + int64(j), x.ts})
			}
		}
		start := rng.Int64N(l.EndOffset())
		if err := l.DeleteRecordsBefore(start); err != nil {
			t.Fatal(err)
		}
		want := r{-1, -1}
		for _, x := range all {
			if x.off >= start && x.ts > want.ts {
				want = x
			}
		}
		for target := int64(-1); target <= 51; target += 2 {
			w := r{-1, -1}
			for _, x := range all {
				if x.off >= start && x.ts >= target {
					w = x
					break
				}
			}
			off, ts, ok, err := l.OffsetForTimestamp(target)
			if err != nil || ok != (w.off >= 0) || (ok && (off != w.off || ts != w.ts)) {
				t.Fatalf("seed %d: timestamp %d: got %d@%d %v %v, want %v", seed, target, off, ts, ok, err, w)
			}
		}
		off, ts, ok, err := l.MaxTimestamp()
		if err != nil || !ok || off != want.off || ts != want.ts {
			t.Fatalf("seed %d: got %d@%d %v %v, want %d@%d", seed, off, ts, ok, err, want.off, want.ts)
		}
		l.Close()
	}
}

// TestCompactionDroppedWhenSegmentsChange truncates the log while a
// compaction pass is between rewriting and swapping: the pass is dropped,
// its files removed, and the next pass compacts.
func TestCompactionDroppedWhenSegmentsChange(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	mem := vfs.NewMemFS()
	l := mustOpen(t, "/cd", cfg, Options{FS: mem})
	defer l.Close()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, buildBatch([]rec{{key: []byte{byte(i % 3)}, value: []byte("v"), ts: 1}}), 0)
		if i%10 == 9 {
			l.Roll()
		}
	}
	size := l.Size()
	l.compactHook = func() {
		if err := l.Truncate(25); err != nil {
			t.Error(err)
		}
	}
	if err := l.Maintain(time.Now()); err != nil {
		t.Fatal(err)
	}
	names, _ := mem.List("/cd")
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) {
			t.Fatalf("left %s behind", n)
		}
	}
	if l.EndOffset() != 25 {
		t.Fatalf("end %d", l.EndOffset())
	}
	truncated := l.Size()
	if truncated >= size {
		t.Fatal("truncate did not happen")
	}
	checkIndexes(t, l)
	l.compactHook = nil
	l.Roll()
	if err := l.Maintain(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.Size() >= truncated {
		t.Fatalf("the next pass did not compact: %d bytes, %d before", l.Size(), truncated)
	}
	checkIndexes(t, l)
}
