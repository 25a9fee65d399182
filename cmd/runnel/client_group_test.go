package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// TestCLIGroups: consume --group reads every record once across two runs
// (the second resumes from the first one's commits), then list, describe,
// reset (dry run, then executed) and delete.
func TestCLIGroups(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}
	c.ok(nil, "topic", "create", "events", "-p", "3")
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "k%d\tv%d\n", i, i)
	}
	c.ok(strings.NewReader(in.String()), "produce", "events", "--key-sep", "\t")

	first := parseLines(t, c.ok(nil, "consume", "events", "--group", "cli", "-n", "100", "--encoding", "string"))
	rest := parseLines(t, c.ok(nil, "consume", "events", "--group", "cli", "--encoding", "string"))
	seen := map[string]bool{}
	for _, r := range append(first, rest...) {
		v := fmt.Sprint(r.Value)
		if seen[v] {
			t.Fatalf("record %s consumed twice", v)
		}
		seen[v] = true
	}
	if len(first) != 100 || len(seen) != 300 {
		t.Fatalf("first run %d records, both %d distinct; want 100 and 300", len(first), len(seen))
	}

	if out := c.ok(nil, "group", "list"); !strings.Contains(out, "cli") || !strings.Contains(out, "Empty") {
		t.Fatalf("group list:\n%s", out)
	}
	var d struct {
		State   string `json:"state"`
		Lag     int64  `json:"lag"`
		Offsets []struct {
			CommittedOffset int64 `json:"committed_offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(c.ok(nil, "group", "describe", "cli", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.State != "Empty" || d.Lag != 0 || len(d.Offsets) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	if out := c.ok(nil, "group", "describe", "cli"); !strings.Contains(out, "LAG TIME") {
		t.Fatalf("describe table:\n%s", out)
	}

	_, errOut, err := c.run(nil, "group", "reset", "cli", "--to-earliest")
	if err != nil || !strings.Contains(errOut, "Dry run") {
		t.Fatalf("dry run: %v %s", err, errOut)
	}
	if err := json.Unmarshal([]byte(c.ok(nil, "group", "describe", "cli", "-o", "json")), &d); err != nil || d.Lag != 0 {
		t.Fatalf("a dry run changed the offsets: lag %d, %v", d.Lag, err)
	}
	c.ok(nil, "group", "reset", "cli", "--to-earliest", "--execute")
	if err := json.Unmarshal([]byte(c.ok(nil, "group", "describe", "cli", "-o", "json")), &d); err != nil || d.Lag != 300 {
		t.Fatalf("after reset to earliest: lag %d, %v", d.Lag, err)
	}
	c.ok(nil, "group", "delete", "cli")
	if _, errOut, err := c.run(nil, "group", "describe", "cli"); err == nil || !strings.Contains(errOut, "404") {
		t.Fatalf("describe after delete: %v %s", err, errOut)
	}
}
