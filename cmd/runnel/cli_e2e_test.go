package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// cli runs the real runnel binary against one node.
type cli struct {
	t      *testing.T
	bin    string
	server string
}

// run executes runnel with args (and stdin when non-nil) and returns its
// stdout, stderr and exit error.
func (c cli) run(stdin io.Reader, args ...string) (string, string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--server", c.server}, args...)...)
	cmd.Env = append(os.Environ(), "RUNNEL_SERVER=")
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// ok runs runnel and fails the test unless it exits 0.
func (c cli) ok(stdin io.Reader, args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(stdin, args...)
	if err != nil {
		c.t.Fatalf("runnel %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// consumedRecord is what consume prints per line.
type consumedRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`
	Value     any     `json:"value"`
}

func parseLines(t *testing.T, out string) []consumedRecord {
	t.Helper()
	var recs []consumedRecord
	for line := range strings.Lines(out) {
		var r consumedRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume line %q is not a JSON record: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestCLIEndToEnd(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}

	out := c.ok(nil, "topic", "create", "orders", "-p", "2", "-r", "1", "-c", "retention.ms=3600000")
	if !strings.Contains(out, `Created topic "orders" with 2 partition(s)`) {
		t.Fatalf("topic create printed %q", out)
	}
	if _, errOut, err := c.run(nil, "topic", "create", "orders"); err == nil || !strings.Contains(errOut, "409") {
		t.Fatalf("creating a topic twice: err %v, stderr %q; want a 409 problem", err, errOut)
	}

	// 1200 keyed lines from a file: three requests of at most 500 records.
	const n = 1200
	file := filepath.Join(t.TempDir(), "in.txt")
	var in bytes.Buffer
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%d", i%37), fmt.Sprintf("value %d", i)
		fmt.Fprintf(&in, "%s\t%s\n", k, v)
		want[v] = k
	}
	if err := os.WriteFile(file, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := c.run(nil, "produce", "orders", "-i", file, "--key-sep", "\t")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("Produced %d records", n)) || !strings.Contains(out, "in 3 batches") {
		t.Fatalf("produce summary %q", out)
	}
	if !strings.Contains(errOut, "100%") {
		t.Fatalf("produce from a file drew no complete progress bar: %q", errOut)
	}

	// consume -n stops after n records; consume with no limit reads everything once.
	if recs := parseLines(t, c.ok(nil, "consume", "orders", "-n", "7")); len(recs) != 7 {
		t.Fatalf("consume -n 7 printed %d records", len(recs))
	}
	// A small --fetch-max makes every partition take several requests.
	recs := parseLines(t, c.ok(nil, "consume", "orders", "--encoding", "string", "--fetch-max", "64"))
	if len(recs) != n {
		t.Fatalf("consume printed %d records, want %d", len(recs), n)
	}
	perPartition := map[int32]int64{}
	for _, r := range recs {
		v, _ := r.Value.(string)
		if r.Key == nil || want[v] != *r.Key {
			t.Fatalf("record %+v: value %q was produced with key %q", r, v, want[v])
		}
		delete(want, v)
		if r.Offset != perPartition[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d (in order, no gaps)", r.Partition, r.Offset, perPartition[r.Partition])
		}
		perPartition[r.Partition]++
	}
	if len(want) != 0 || len(perPartition) != 2 {
		t.Fatalf("%d produced values never consumed; partitions seen %v", len(want), perPartition)
	}
	// Batches of exactly 100 records read 50 at a time: every other response
	// ends exactly on a batch boundary, where nothing may be skipped.
	var seq strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	c.ok(strings.NewReader(seq.String()), "produce", "orders", "--partition", "0", "--batch-size", "100", "--encoding", "json")
	p0 := parseLines(t, c.ok(nil, "consume", "orders", "-p", "0", "--offset", fmt.Sprint(perPartition[0]),
		"--fetch-max", "50", "--encoding", "json"))
	if len(p0) != 1000 {
		t.Fatalf("consume -p 0 --fetch-max 50 read %d of 1000 records", len(p0))
	}
	for i, r := range p0 {
		if v, _ := r.Value.(float64); r.Offset != perPartition[0]+int64(i) || int(v) != i {
			t.Fatalf("record %d: offset %d value %v", i, r.Offset, r.Value)
		}
	}
	perPartition[0] += 1000

	p1 := parseLines(t, c.ok(nil, "consume", "orders", "-p", "1", "--offset", "3", "-n", "2"))
	if len(p1) != 2 || p1[0].Partition != 1 || p1[0].Offset != 3 || p1[1].Offset != 4 {
		t.Fatalf("consume -p 1 --offset 3 -n 2 = %+v", p1)
	}

	// describe -o json prints the API's document.
	var d struct {
		Name       string            `json:"name"`
		Configs    map[string]string `json:"configs"`
		Partitions []struct {
			Partition     int32 `json:"partition"`
			HighWatermark int64 `json:"high_watermark"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(c.ok(nil, "topic", "describe", "orders", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "orders" || len(d.Partitions) != 2 || d.Configs["retention.ms"] != "3600000" {
		t.Fatalf("describe -o json = %+v", d)
	}
	for _, p := range d.Partitions {
		if p.HighWatermark != perPartition[p.Partition] {
			t.Fatalf("partition %d high watermark %d, consumed %d", p.Partition, p.HighWatermark, perPartition[p.Partition])
		}
	}
	if out := c.ok(nil, "topic", "describe", "orders"); !strings.Contains(out, "retention.ms=3600000") ||
		!strings.Contains(out, "PARTITION  LEADER") {
		t.Fatalf("describe table:\n%s", out)
	}

	out = c.ok(nil, "cluster")
	for _, w := range []string{"Cluster ID:", "Active controller:  1", "CONTROLLERS", "leader", "BROKERS", "alive"} {
		if !strings.Contains(out, w) {
			t.Fatalf("cluster output lacks %q:\n%s", w, out)
		}
	}

	out = c.ok(nil, "topic", "alter-config", "orders", "-c", "retention.ms=1000", "-c", "cleanup.policy=compact")
	if !strings.Contains(out, "retention.ms=1000") || !strings.Contains(out, "cleanup.policy=compact") {
		t.Fatalf("alter-config printed %q", out)
	}
	out = c.ok(nil, "topic", "alter-config", "orders", "--delete", "cleanup.policy")
	if strings.Contains(out, "cleanup.policy") {
		t.Fatalf("alter-config --delete left the config: %q", out)
	}
	if out := c.ok(nil, "topic", "list"); !strings.Contains(out, "orders") {
		t.Fatalf("topic list:\n%s", out)
	}
	// Pages: every topic once, in order, whatever the page size.
	for _, name := range []string{"pg-c", "pg-a", "pg-e", "pg-b", "pg-d"} {
		c.ok(nil, "topic", "create", name, "-p", "1")
	}
	for _, size := range []string{"1", "2", "5", "0"} {
		out := c.ok(nil, "topic", "list", "--prefix", "pg-", "--page-size", size)
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "pg-") {
				names = append(names, f[0])
			}
		}
		if strings.Join(names, ",") != "pg-a,pg-b,pg-c,pg-d,pg-e" {
			t.Fatalf("topic list --page-size %s: %v\n%s", size, names, out)
		}
		var doc struct {
			Topics []struct{ Name string } `json:"topics"`
		}
		if err := json.Unmarshal([]byte(c.ok(nil, "topic", "list", "--prefix", "pg-", "--page-size", size, "-o", "json")), &doc); err != nil || len(doc.Topics) != 5 {
			t.Fatalf("topic list -o json --page-size %s: %+v, %v", size, doc, err)
		}
	}
	// Not a terminal and no --yes: refused, the topic stays.
	if _, errOut, err := c.run(strings.NewReader("y\n"), "topic", "delete", "orders"); err == nil || !strings.Contains(errOut, "--yes") {
		t.Fatalf("topic delete without --yes: err %v, stderr %q; want a refusal naming --yes", err, errOut)
	}
	c.ok(nil, "topic", "describe", "orders")
	c.ok(nil, "topic", "delete", "orders", "--yes")
	_, errOut, err = c.run(nil, "topic", "describe", "orders")
	if err == nil || !strings.Contains(errOut, "404") {
		t.Fatalf("describe after delete: err %v, stderr %q; want a 404 problem and a non-zero exit", err, errOut)
	}
}

// TestCLIFollow starts `consume -f`, produces from stdin while it waits, and
// stops it with SIGINT, which must end it cleanly.
func TestCLIFollow(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}
	c.ok(nil, "topic", "create", "tail", "-p", "3")

	cmd := exec.Command(c.bin, "--server", c.server, "consume", "tail", "-f", "--offset", "latest", "--wait", "1s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var (
		mu    sync.Mutex
		lines []string
		read  sync.WaitGroup
	)
	read.Add(1)
	go func() {
		defer read.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(lines) }

	// The consumer starts at "latest": produce until it has seen records, so
	// records written before its first poll do not make the test flaky.
	servertest.WaitFor(t, 20*time.Second, "consume -f to print records", func() bool {
		c.ok(strings.NewReader("a\nb\nc\n"), "produce", "tail")
		time.Sleep(100 * time.Millisecond)
		return count() >= 3
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	read.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume -f after SIGINT: %v\n%s", err, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		var r consumedRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	if !strings.Contains(stderr.String(), "Consumed ") {
		t.Fatalf("no summary on stderr: %q", stderr.String())
	}
}

// TestCLITopicListStreamsPages: `topic list` prints each page before it
// asks for the next, in the table and with -o json, so a list of 100,000
// topics starts printing at once and is never held whole. A proxy in front
// of a real node holds every request for a later page until the CLI's
// output shows the previous page's topic (bounded: a CLI that collects
// everything first never shows it, and the proxy gives up with an error).
func TestCLITopicListStreamsPages(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	bin := servertest.Binary(t)
	names := []string{"st-a", "st-b", "st-c"}
	for _, name := range names {
		cli{t: t, bin: bin, server: node.URL}.ok(nil, "topic", "create", name, "-p", "1")
	}
	target, err := url.Parse(node.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"-o", "json"}} {
		var (
			mu  sync.Mutex
			out bytes.Buffer
		)
		printed := func(s string) bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Contains(out.String(), s)
		}
		var held []string // what each later page's request waited for
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") != "" {
				// The page before this one ended with the topic it names.
				n := len(held)
				held = append(held, names[n])
				deadline := time.Now().Add(30 * time.Second)
				for !printed(names[n]) {
					if time.Now().After(deadline) {
						http.Error(w, "the previous page was not printed", http.StatusTeapot)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			proxy.ServeHTTP(w, r)
		}))
		cmd := exec.Command(bin, append([]string{"--server", srv.URL, "topic", "list", "--prefix", "st-", "--page-size", "1"}, args...)...)
		cmd.Env = append(os.Environ(), "RUNNEL_SERVER=")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				break
			}
		}
		err = cmd.Wait()
		srv.Close()
		if err != nil {
			t.Fatalf("topic list %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errOut.String())
		}
		if len(held) != len(names)-1 {
			t.Fatalf("topic list %v asked %d later pages, want %d", args, len(held), len(names)-1)
		}
		for _, name := range names {
			if !printed(name) {
				t.Fatalf("topic list %v printed no %s:\n%s", args, name, out.String())
			}
		}
		if len(args) > 0 {
			var doc struct {
				Topics []struct{ Name string } `json:"topics"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Topics) != len(names) {
				t.Fatalf("topic list -o json: %+v, %v\n%s", doc, err, out.String())
			}
		}
	}
}
