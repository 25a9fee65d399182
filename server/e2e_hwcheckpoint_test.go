package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel/runnel/server/broker/hwcheckpoint"
	"github.com/runnel/runnel/server/servertest"
)

// TestHighWatermarkCheckpointFile (issue 19): a node run with
// --high-watermark-checkpoint-interval writes every partition's high
// watermark into its data directory's one checkpoint file on that timer,
// with no file per partition, and after a restart serves its records up
// to those marks.
func TestHighWatermarkCheckpointFile(t *testing.T) {
	const parts, records = 3, 2
	n := servertest.Start(t, servertest.Options{Args: []string{"--high-watermark-checkpoint-interval", "100ms"}})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "hwc", "partitions": parts}, 201, nil)
	for p := range parts {
		for i := range records {
			c.json("POST", "/v1/topics/hwc/records?acks=all&encoding=string", map[string]any{
				"records": []map[string]any{{"value": fmt.Sprintf("v%d", i), "partition": p}}}, 200, nil)
		}
	}
	path := filepath.Join(n.DataDir, "partitions", "high-watermark-checkpoint")
	deadline := time.Now().Add(30 * time.Second)
	for {
		marks := map[string]int64{}
		if raw, err := os.ReadFile(path); err == nil {
			cp, err := hwcheckpoint.Decode(raw)
			if err != nil {
				t.Fatalf("checkpoint does not decode: %v", err)
			}
			for _, tp := range cp {
				for _, p := range tp.Partitions {
					marks[fmt.Sprintf("%s-%d", tp.Name, p.Index)] = p.HighWatermark
				}
			}
		}
		if marks["hwc-0"] == records && marks["hwc-1"] == records && marks["hwc-2"] == records {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint holds %v 30 s after the writes, want hwc-0..2 at %d", marks, records)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for p := range parts {
		if _, err := os.Stat(filepath.Join(n.DataDir, "partitions", fmt.Sprintf("hwc-%d", p), "high-watermark")); err == nil {
			t.Errorf("hwc-%d has a high-watermark file of its own", p)
		}
	}
	n.Stop()
	n.Start()
	for p := range parts {
		var got consumed
		c.json("GET", fmt.Sprintf("/v1/topics/hwc/partitions/%d/records?offset=0&encoding=string", p), nil, 200, &got)
		if len(got.Records) != records || got.HighWatermark != records {
			t.Fatalf("hwc-%d after a restart: %d records, high watermark %d; want %d and %d", p, len(got.Records), got.HighWatermark, records, records)
		}
	}
}
