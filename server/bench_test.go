package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/servertest"

	"github.com/runnel/runnel/recordbatch"
)

// HTTP produce and consume throughput, each reported beside the raw
// segments append rate of the same records measured in the same run, so the
// ratio says what the HTTP path costs on this machine.

const (
	benchBatch      = 100
	benchValueBytes = 1000
)

func benchRecordsJSON() []byte {
	value := strings.Repeat("v", benchValueBytes)
	var recs []map[string]any
	for i := 0; i < benchBatch; i++ {
		recs = append(recs, map[string]any{"key": fmt.Sprintf("key-%d", i), "value": value, "partition": 0})
	}
	body, _ := json.Marshal(map[string]any{"records": recs})
	return body
}

// segmentsAppendRate appends n batches of the benchmark's records straight
// to a segments.Log and returns records per second.
func segmentsAppendRate(b *testing.B, n int) float64 {
	b.Helper()
	log, err := segments.Open(b.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	recs := make([]recordbatch.NewRecord, benchBatch)
	for i := range recs {
		recs[i] = recordbatch.NewRecord{Key: []byte(fmt.Sprintf("key-%d", i)), Value: bytes.Repeat([]byte("v"), benchValueBytes+2), Timestamp: time.Now().UnixMilli()}
	}
	batch := recordbatch.Build(recs)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := log.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n*benchBatch) / time.Since(start).Seconds()
}

func startBenchNode(b *testing.B) *servertest.Node {
	n := servertest.Start(b, servertest.Options{})
	resp, err := http.Post(n.URL+"/v1/topics", "application/json", strings.NewReader(`{"name":"bench","partitions":1}`))
	if err != nil || resp.StatusCode != 201 {
		b.Fatalf("create topic: %v %v", err, resp)
	}
	resp.Body.Close()
	return n
}

func BenchmarkHTTPProduce(b *testing.B) {
	n := startBenchNode(b)
	body := benchRecordsJSON()
	url := n.URL + "/v1/topics/bench/records?encoding=string"
	client := &http.Client{}
	b.SetBytes(int64(benchBatch * benchValueBytes))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("produce: %d", resp.StatusCode)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	rate := float64(b.N*benchBatch) / elapsed.Seconds()
	base := segmentsAppendRate(b, max(b.N, 100))
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(base, "segments_records/s")
	b.ReportMetric(rate/base, "ratio_vs_segments")
}

func BenchmarkHTTPConsume(b *testing.B) {
	n := startBenchNode(b)
	body := benchRecordsJSON()
	const batches = 200
	for i := 0; i < batches; i++ {
		resp, err := http.Post(n.URL+"/v1/topics/bench/records?encoding=string", "application/json", bytes.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("produce: %v", err)
		}
		resp.Body.Close()
	}
	total := batches * benchBatch
	b.SetBytes(int64(1000 * benchValueBytes))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		off := (i * 1000) % total
		resp, err := http.Get(fmt.Sprintf("%s/v1/topics/bench/partitions/0/records?offset=%d&max_records=1000&max_bytes=4000000&encoding=string", n.URL, off))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	rate := float64(b.N*1000) / elapsed.Seconds()
	base := segmentsAppendRate(b, 100)
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(base, "segments_append_records/s")
	b.ReportMetric(rate/base, "ratio_vs_segments_append")
}
