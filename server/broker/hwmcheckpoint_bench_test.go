package broker

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// BenchmarkCheckpointRound is a maintenance round and a checkpoint round
// after the high watermark of every partition moved: 10,000 partitions
// with RUNNEL_BENCH=1 (issue 19), 200 otherwise. fsyncs/op counts the
// file and directory fsyncs of a round.
func BenchmarkCheckpointRound(b *testing.B) {
	logs := 200
	if os.Getenv("RUNNEL_BENCH") == "1" {
		logs = 10_000
	}
	var fsyncs atomic.Int64
	efs := vfs.NewErrorFS(vfs.OSFS(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			fsyncs.Add(1)
		}
		return nil
	})
	br := writtenLogs(b, b.TempDir(), efs, logs)
	defer br.Close()
	parts := br.opened()
	ctx := context.Background()
	b.ResetTimer()
	fsyncs.Store(0)
	for b.Loop() {
		for _, p := range parts {
			p.hwm.Add(1) // as the in-sync replicas' fetches move it
			p.hwmMoved()
		}
		br.maintain(ctx, time.Now())
		if err := br.checkpointHWMs(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(fsyncs.Load())/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(logs), "partitions")
}
