package segments

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 512
	l := mustOpen(t, dir, cfg, Options{})
	var want [][]byte
	for i := 0; i < 50; i++ {
		b := valueBatch(3, 100, int64(1000+i*10))
		info := mustAppend(t, l, b, 5)
		if info.BaseOffset != int64(i*3) || info.LastOffset != int64(i*3+2) {
			t.Fatalf("append %d: got %+v", i, info)
		}
		want = append(want, bytes.Clone(b))
	}
	if l.Segments() < 2 {
		t.Fatalf("expected rolls, have %d segments", l.Segments())
	}
	check := func(l *Log) {
		t.Helper()
		if got := l.EndOffset(); got != 150 {
			t.Fatalf("end offset %d", got)
		}
		for i := 0; i < 150; i++ {
			b := readAll(t, l, int64(i), 1)
			if !bytes.Equal(b, want[i/3]) {
				t.Fatalf("read %d: got batch of %d bytes, want batch %d", i, len(b), i/3)
			}
			rb := decodeBatches(t, b)[0]
			if rb.FirstOffset != int64(i/3*3) || rb.PartitionLeaderEpoch != 5 {
				t.Fatalf("read %d: header %+v", i, rb)
			}
		}
		c, err := l.Read(150, 100, -1)
		if err != nil || c.Len() != 0 {
			t.Fatalf("read at end: %v %v", c, err)
		}
		if _, err := l.Read(151, 100, -1); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past end: %v", err)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{})
	check(l)
	l.Close()
}

func TestReadBounds(t *testing.T) {
	l := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer l.Close()
	var sizes []int
	for i := 0; i < 20; i++ {
		b := valueBatch(2, 50, 1)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b, 0)
	}
	tests := []struct {
		name      string
		off       int64
		maxBytes  int
		maxOffset int64
		batches   int
	}{
		{"one batch at least", 0, 1, -1, 1},
		{"two fit", 0, sizes[0] * 2, -1, 2},
		{"two and a bit", 0, sizes[0]*2 + 10, -1, 2},
		{"middle of batch", 5, sizes[0] * 3, -1, 3},
		{"all", 0, 1 << 20, -1, 20},
		{"max offset", 0, 1 << 20, 10, 5},
		{"max offset inside batch", 0, 1 << 20, 11, 6},
		{"max offset before", 10, 1 << 20, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := l.Read(tt.off, tt.maxBytes, tt.maxOffset)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			b, _ := c.Bytes()
			if got := len(decodeBatches(t, b)); got != tt.batches {
				t.Fatalf("got %d batches, want %d", got, tt.batches)
			}
		})
	}
}

func TestAppendRejects(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 2000
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	good := valueBatch(2, 10, 1)
	mustAppend(t, l, bytes.Clone(good), 0)
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, recordbatch.ErrCorruptBatch},
		{"short", good[:40], recordbatch.ErrCorruptBatch},
		{"torn", good[:len(good)-1], recordbatch.ErrCorruptBatch},
		{"crc", flip(len(good) - 1), recordbatch.ErrCorruptBatch},
		{"magic", flip(recordbatch.MagicAt), recordbatch.ErrCorruptBatch},
		{"count", flip(recordbatch.NumRecordsAt + 3), recordbatch.ErrCorruptBatch},
		{"second bad", append(bytes.Clone(good), flip(recordbatch.AttrAt+3)...), recordbatch.ErrCorruptBatch},
		{"too large", valueBatch(3, 1000, 1), recordbatch.ErrBatchTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(tt.b, 0); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if l.EndOffset() != 2 || l.Size() != int64(len(good)) {
				t.Fatalf("log changed: end %d size %d", l.EndOffset(), l.Size())
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	l := mustOpen(t, "/t", cfg, Options{FS: vfs.NewMemFS()})
	defer l.Close()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, valueBatch(2, 100, int64(i)), int32(i/10))
	}
	if err := l.Truncate(31); err != nil { // inside batch 15
		t.Fatal(err)
	}
	if got := l.EndOffset(); got != 30 {
		t.Fatalf("end %d, want 30", got)
	}
	if e, off, _ := l.EndOffsetForEpoch(1); e != 1 || off != 30 {
		t.Fatalf("epoch 1 ends at %d/%d", e, off)
	}
	if e, off, _ := l.EndOffsetForEpoch(2); e != -1 || off != -1 {
		t.Fatalf("epoch 2: %d/%d", e, off)
	}
	info := mustAppend(t, l, valueBatch(1, 10, 1), 3)
	if info.BaseOffset != 30 {
		t.Fatalf("append after truncate at %d", info.BaseOffset)
	}
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 4 || l.Segments() != 1 {
		t.Fatalf("end %d segments %d", l.EndOffset(), l.Segments())
	}
	if e, off, _ := l.EndOffsetForEpoch(0); e != 0 || off != 4 {
		t.Fatalf("epoch 0 after truncate: %d/%d", e, off)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 800
	cfg.IndexIntervalBytes = 100
	l := mustOpen(t, "/t", cfg, Options{FS: vfs.NewMemFS()})
	defer l.Close()
	// Batch i holds offsets 3i..3i+2 with timestamps 100i, 100i+1, 100i+2.
	for i := 0; i < 40; i++ {
		mustAppend(t, l, valueBatch(3, 20, int64(100*i)), 0)
	}
	tests := []struct {
		ts, off, at int64
		ok          bool
	}{
		{0, 0, 0, true},
		{1, 1, 1, true},
		{3, 3, 100, true},
		{2001, 61, 2001, true},
		{3902, 119, 3902, true},
		{3903, 0, 0, false},
	}
	for _, tt := range tests {
		off, at, ok, err := l.OffsetForTimestamp(tt.ts)
		if err != nil || ok != tt.ok || (ok && (off != tt.off || at != tt.at)) {
			t.Errorf("ts %d: got %d %d %v %v, want %d %d %v", tt.ts, off, at, ok, err, tt.off, tt.at, tt.ok)
		}
	}
}

func TestDeleteRecordsAndRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	now := time.UnixMilli(1_000_000)
	l := mustOpen(t, "/t", cfg, Options{FS: vfs.NewMemFS(), Now: func() time.Time { return now }})
	defer l.Close()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, valueBatch(2, 100, now.UnixMilli()+int64(i)), 0)
	}
	segs := l.Segments()
	if err := l.DeleteRecordsBefore(7); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 7 {
		t.Fatalf("start %d", l.StartOffset())
	}
	if _, err := l.Read(6, 100, -1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	b := readAll(t, l, 7, 1)
	if decodeBatches(t, b)[0].FirstOffset != 6 {
		t.Fatal("read at start did not return the batch holding it")
	}
	if err := l.DeleteRecordsBefore(30); err != nil {
		t.Fatal(err)
	}
	if l.Segments() >= segs {
		t.Fatalf("segments %d, had %d", l.Segments(), segs)
	}
	cfg.RetentionMs = 1000
	l.SetConfig(cfg)
	if err := l.Maintain(now.Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	before := l.Segments()
	if err := l.Maintain(now.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 1 || before == 1 {
		t.Fatalf("retention left %d segments (had %d)", l.Segments(), before)
	}
	if l.StartOffset() != 60 && l.StartOffset() != l.EndOffset()-int64(0) {
		t.Logf("start offset %d end %d", l.StartOffset(), l.EndOffset())
	}
}
