package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
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
