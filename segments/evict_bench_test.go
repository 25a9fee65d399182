package segments

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppendEvicting is one append of one small record to each of
// many logs in turn behind a FileCache holding a tenth of their files, so
// every append opens its segment file and closes another's (issue 19: a
// burst writing one record to each of 300,000 partitions behind a
// descriptor limit of 20,000). 2,000 logs behind 200 files (20,000 behind
// 2,000 with RUNNEL_BENCH=1); one op is one append.
func BenchmarkAppendEvicting(b *testing.B) {
	n := 2_000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		n = 20_000
	}
	files := NewFileCache(n / 10)
	root := b.TempDir()
	cfg := DefaultConfig()
	logs := make([]*Log, n)
	for i := range logs {
		logs[i] = mustOpen(b, filepath.Join(root, fmt.Sprint(i)), cfg, Options{Files: files})
		defer abandon(logs[i]) // a Close each would be a dozen fsyncs
	}
	batch := valueBatch(1, 100, 1_700_000_000_000)
	for _, l := range logs { // every segment file created and written once
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := logs[i].Append(batch, 1); err != nil {
			b.Fatal(err)
		}
		if i++; i == n {
			i = 0
		}
	}
	if files.OpenFiles() > n/10 {
		b.Fatalf("%d files open, want at most %d", files.OpenFiles(), n/10)
	}
}
