package server_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// TestLazyPartitionsAfterKill9 (issue 19): a partition nobody used costs
// the node no file descriptor, before and after a kill -9; the first read
// of a partition written before the kill opens (and recovers) its log and
// returns every acknowledged record. Before lazy logs the restart opened
// all of them, each holding its segment file open.
func TestLazyPartitionsAfterKill9(t *testing.T) {
	const idle, records = 400, 20
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "a", "partitions": 1}, 201, nil)
	before := openFDs(t, n.PID())
	c.json("POST", "/v1/topics", map[string]any{"name": "idle", "partitions": idle}, 201, nil)
	if grown := openFDs(t, n.PID()) - before; grown > idle/4 {
		t.Errorf("creating %d partitions opened %d file descriptors", idle, grown)
	}
	for i := range records {
		var out producedOffsets
		c.json("POST", "/v1/topics/a/records?acks=all&encoding=string", map[string]any{
			"records": []map[string]any{{"value": fmt.Sprintf("v%d", i)}}}, 200, &out)
		if len(out.Offsets) != 1 || out.Offsets[0].Offset != int64(i) {
			t.Fatalf("produce %d: %+v", i, out)
		}
	}
	n.Kill()
	n.Start()
	if fds := openFDs(t, n.PID()); fds > idle/2 {
		t.Fatalf("%d file descriptors open after a restart with %d partitions never used, want far fewer", fds, idle)
	}
	// Describing the idle topic reports its empty partitions without
	// opening them.
	c.json("GET", "/v1/topics/idle", nil, 200, nil)
	if fds := openFDs(t, n.PID()); fds > idle/2 {
		t.Fatalf("%d file descriptors open after describing %d empty partitions", fds, idle)
	}
	var got consumed
	c.json("GET", "/v1/topics/a/partitions/0/records?offset=0&encoding=string&max_records=100", nil, 200, &got)
	if len(got.Records) != records {
		t.Fatalf("first read after kill -9 returned %d records, want %d", len(got.Records), records)
	}
	for i, r := range got.Records {
		if want := strconv.Quote(fmt.Sprintf("v%d", i)); r.Offset != int64(i) || string(r.Value) != want {
			t.Fatalf("record %d: offset %d value %s, want %d %s", i, r.Offset, r.Value, i, want)
		}
	}
}

// openFDs counts the file descriptors process pid holds.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("count file descriptors: %v", err)
	}
	return len(entries)
}
