package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// rssLimit is what a node may reach under every hostile HTTP test here
// (issue 12: "node RSS stays < 1 GB").
const rssLimit = 1 << 30

func checkRSS(t *testing.T, n *servertest.Node, what string) {
	t.Helper()
	cur, peak := n.RSS()
	t.Logf("%s: RSS %d MiB, peak %d MiB", what, cur>>20, peak>>20)
	if peak >= rssLimit {
		t.Fatalf("%s: peak RSS %d MiB, want < %d MiB", what, peak>>20, rssLimit>>20)
	}
}

// rawProblem reads a problem+json answer.
func rawProblem(t *testing.T, resp *http.Response) problem {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var p problem
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, ct, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("status %d: not a problem: %s", resp.StatusCode, body)
	}
	return p
}

// TestHostileProduceEmptyRecords: 16 MB bodies of {} (5.6 M records each),
// three at once, are refused with 413 too-many-records, and the node's RSS
// stays far from the 2.8 GB one such body used to cost.
func TestHostileProduceEmptyRecords(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "flood", "partitions": 1}, 201, nil)
	body := []byte(`{"records":[` + strings.Repeat(`{},`, (16<<20-32)/3) + `{}]}`)
	client := &http.Client{Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan string, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(n.URL+"/v1/topics/flood/records", "application/json", bytes.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			p := rawProblem(t, resp)
			if resp.StatusCode != 413 || !strings.HasSuffix(p.Type, "too-many-records") {
				errs <- resp.Status + " " + p.Type
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a flood request: %s", e)
	}
	checkRSS(t, n, "after three 16 MB bodies of {}")
	// Nothing was written and the node still serves.
	var out consumed
	c.json("GET", "/v1/topics/flood/partitions/0/records", nil, 200, &out)
	if len(out.Records) != 0 {
		t.Fatalf("%d records were written", len(out.Records))
	}
}

// fillPartitions writes recs records of size bytes to every partition of
// topic (12 MB at most a request).
func fillPartitions(t *testing.T, n *servertest.Node, topic string, partitions, recs, size int) {
	t.Helper()
	value := `"` + strings.Repeat("QUJD", size/3) + `"`
	client := &http.Client{Timeout: 120 * time.Second}
	var body strings.Builder
	flush := func() {
		if body.Len() == 0 {
			return
		}
		resp, err := client.Post(n.URL+"/v1/topics/"+topic+"/records?encoding=base64&acks=1", "application/json",
			strings.NewReader(`{"records":[`+strings.TrimSuffix(body.String(), ",")+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("fill %s: %d %s", topic, resp.StatusCode, msg)
		}
		body.Reset()
	}
	for p := range partitions {
		for range recs {
			if body.Len()+len(value) > 12<<20 {
				flush()
			}
			body.WriteString(`{"partition":` + strconv.Itoa(p) + `,"value":` + value + `},`)
		}
	}
	flush()
}

// openNonReading sends GET path on a raw connection and reads only the
// status line and headers (the body stays in the socket: the client does
// not read). It returns the connection and the status.
func openNonReading(t *testing.T, n *servertest.Node, path string) (net.Conn, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", n.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+n.HTTPAddr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(120 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return conn, resp
}

// samplePeak watches the node for a few seconds (a measurement, not an
// ordering: readers behind open streams keep reading meanwhile).
func samplePeak(t *testing.T, n *servertest.Node, what string) {
	t.Helper()
	for range 10 {
		checkRSS(t, n, what)
		time.Sleep(300 * time.Millisecond)
	}
}

// TestHostileNonReadingClients: ten SSE streams of a 200-partition topic
// and ten 64 MiB base64 consumes whose clients never read keep the node
// under 1 GB (2.08 GB and 4.56 GB before); what does not fit the memory
// budget is answered 503 with Retry-After.
func TestHostileNonReadingClients(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	big := map[string]string{"max.message.bytes": "16777216"}
	c.json("POST", "/v1/topics", map[string]any{"name": "wide", "partitions": 200, "configs": big}, 201, nil)
	c.json("POST", "/v1/topics", map[string]any{"name": "deep", "partitions": 1, "configs": big}, 201, nil)
	fillPartitions(t, n, "wide", 200, 4, 256<<10) // 1 MiB a partition: a whole first batch each
	fillPartitions(t, n, "deep", 1, 288, 256<<10) // 72 MiB
	checkRSS(t, n, "after filling")

	for i := range 10 {
		_, resp := openNonReading(t, n, "/v1/topics/wide/records/stream?offset=earliest&encoding=base64")
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %s", i, resp.Status)
		}
	}
	samplePeak(t, n, "10 non-reading streams of 200 partitions")

	ok := 0
	for i := range 10 {
		_, resp := openNonReading(t, n, "/v1/topics/deep/partitions/0/records?offset=0&max_records=10000&max_bytes=67108864&encoding=base64")
		switch {
		case resp.StatusCode == 200:
			ok++
		case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
		default:
			t.Fatalf("consume %d: %s", i, resp.Status)
		}
	}
	if ok == 0 {
		t.Fatal("every big consume was refused")
	}
	samplePeak(t, n, "and 10 non-reading 64 MiB consumes")
}

// TestHostileLongPolls: over the per-client limit a long poll is answered
// 429 with Retry-After (problem+json).
func TestHostileLongPolls(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--http-max-long-polls-per-ip", "2"}})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "lp", "partitions": 1}, 201, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	statuses := make(chan *http.Response, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/v1/topics/lp/partitions/0/records?wait_ms=30000", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- nil
				return
			}
			statuses <- resp
		}()
	}
	// Two of three wait 30 s; the one over the limit is answered at once.
	resp := <-statuses
	cancel()
	wg.Wait()
	if resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("first answer of three long polls with a limit of 2: %+v", resp)
	}
	if p := rawProblem(t, resp); !strings.HasSuffix(p.Type, "too-many-requests") {
		t.Fatalf("problem %+v", p)
	}
}

// TestHostileConnections: connections from one address over its limit are
// answered 429 problem+json with Retry-After and closed; the node serves
// others meanwhile and that address again once its connections close.
func TestHostileConnections(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--http-max-connections-per-ip", "8"}})
	http.DefaultClient.CloseIdleConnections() // the readiness polls' connections
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var refused *http.Response
	for range 16 { // bounded: the node's own clients may hold a few slots
		conn, err := net.Dial("tcp", n.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
		if _, err := io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			continue // closed at once: refused
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", len(held), err)
		}
		resp.Body.Close()
		if resp.StatusCode == 429 {
			refused = resp
			break
		}
	}
	if refused == nil || refused.Header.Get("Retry-After") == "" || refused.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("16 connections from one address with a limit of 8: no 429 (%+v)", refused)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	servertest.WaitFor(t, 30*time.Second, "a connection accepted again", func() bool {
		resp, err := http.Get(n.URL + "/livez")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}
