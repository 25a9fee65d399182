package segments

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// A segment's file name and path are the format's (base zero-padded to 20
// digits, joined to the log's directory as filepath.Join would), made
// without Sprintf and Join on every append and read; and a log's
// directory is kept clean, which path relies on.
func TestSegmentPath(t *testing.T) {
	for _, base := range []int64{0, 7, 1234567890, 1<<32 + 5, math.MaxInt64} {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if got, want := segmentName(base, suffix), fmt.Sprintf("%020d%s", base, suffix); got != want {
				t.Errorf("segmentName(%d, %q) = %q, want %q", base, suffix, got, want)
			}
		}
		for _, dir := range []string{"/data/partitions/t-0", "rel/t-0", ".", "/", "a//b/../t-0/"} {
			l, err := newLog(dir, DefaultConfig(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := &segment{base: base}
			if got, want := s.path(l.dir), filepath.Join(dir, fmt.Sprintf("%020d.log", base)); got != want {
				t.Errorf("path of %d in %q (log dir %q) = %q, want %q", base, dir, l.dir, got, want)
			}
		}
	}
}

// BenchmarkSegmentPath is the path an append or read looks its file up by.
func BenchmarkSegmentPath(b *testing.B) {
	s := &segment{base: 1234}
	dir := "/var/lib/runnel/partitions/orders-00042-117"
	for b.Loop() {
		_ = s.path(dir)
	}
}
