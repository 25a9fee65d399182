package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// Concurrent admin writes share raft appends (issue 19); each keeps its own
// answer. raceResult is one request's answer, checked on the test goroutine.
type raceResult struct {
	status int
	body   []byte
	err    error
}

// raceAll sends every request at once (released together) and returns the
// answers in order.
func raceAll(t *testing.T, node *servertest.Node, reqs []func() (*http.Request, error)) []raceResult {
	t.Helper()
	out := make([]raceResult, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, mk := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := mk()
			if err != nil {
				out[i].err = err
				return
			}
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			out[i].status = resp.StatusCode
			out[i].body, out[i].err = io.ReadAll(resp.Body)
		}()
	}
	close(start)
	wg.Wait()
	for i, r := range out {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
	}
	return out
}

func problemType(body []byte) string {
	var p struct{ Type string }
	_ = json.Unmarshal(body, &p)
	return p.Type
}

// TestHTTPConcurrentCreatesOfOneName: 12 clients create the same topic at
// once, for 5 names, while 4 others ask for topics with a bad config: for
// each name exactly one 201 and eleven 409 topic-exists; every bad config
// 400 invalid-config, and no such topic is created.
func TestHTTPConcurrentCreatesOfOneName(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	const names, clients, bad = 5, 12, 4
	var reqs []func() (*http.Request, error)
	var topics []string // of each request
	post := func(body string) func() (*http.Request, error) {
		return func() (*http.Request, error) {
			req, err := http.NewRequest("POST", node.URL+"/v1/topics", strings.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
			}
			return req, err
		}
	}
	for c := range clients {
		for n := range names {
			reqs = append(reqs, post(fmt.Sprintf(`{"name":"same-%d","partitions":1}`, n)))
			topics = append(topics, fmt.Sprintf("same-%d", n))
		}
		if c < bad {
			reqs = append(reqs, post(fmt.Sprintf(`{"name":"bad-%d","partitions":1,"configs":{"retention.ms":"soon"}}`, c)))
			topics = append(topics, fmt.Sprintf("bad-%d", c))
		}
	}
	created := map[string]int{}
	for i, r := range raceAll(t, node, reqs) {
		switch name := topics[i]; {
		case strings.HasPrefix(name, "bad-"):
			if r.status != http.StatusBadRequest || !strings.HasSuffix(problemType(r.body), "invalid-config") {
				t.Errorf("create %s with a bad config: %d %s", name, r.status, r.body)
			}
		case r.status == http.StatusCreated:
			created[name]++
		case r.status != http.StatusConflict || !strings.HasSuffix(problemType(r.body), "topic-exists"):
			t.Errorf("create %s: %d %s", name, r.status, r.body)
		}
	}
	for n := range names {
		if name := fmt.Sprintf("same-%d", n); created[name] != 1 {
			t.Errorf("%s created %d times, want exactly once", name, created[name])
		}
	}
	for c := range bad {
		if status := getStatus(t, fmt.Sprintf("%s/v1/topics/bad-%d", node.URL, c)); status != http.StatusNotFound {
			t.Errorf("bad-%d: GET %d, want 404", c, status)
		}
	}
}

// TestHTTPCreatesRacingDeletes: creations and deletions of one name sent
// at once, in rounds. Each succeeds only if the topic is absent (create) or
// present (delete), so the successes alternate: after every round the
// topic exists exactly when one more creation than deletion succeeded.
func TestHTTPCreatesRacingDeletes(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	url := node.URL + "/v1/topics"
	balance := 0 // successful creations minus deletions
	for round := range 8 {
		var reqs []func() (*http.Request, error)
		for range 4 {
			reqs = append(reqs, func() (*http.Request, error) {
				req, err := http.NewRequest("POST", url, strings.NewReader(`{"name":"flip","partitions":1}`))
				if err == nil {
					req.Header.Set("Content-Type", "application/json")
				}
				return req, err
			}, func() (*http.Request, error) { return http.NewRequest("DELETE", url+"/flip", nil) })
		}
		for i, r := range raceAll(t, node, reqs) {
			switch create := i%2 == 0; {
			case create && r.status == http.StatusCreated:
				balance++
			case !create && r.status == http.StatusNoContent:
				balance--
			case create && r.status == http.StatusConflict, !create && r.status == http.StatusNotFound:
			default:
				t.Fatalf("round %d, request %d: %d %s", round, i, r.status, r.body)
			}
		}
		want := map[int]int{0: http.StatusNotFound, 1: http.StatusOK}[balance]
		if got := getStatus(t, url+"/flip"); want == 0 || got != want {
			t.Fatalf("round %d: %d more creations than deletions succeeded, GET answers %d", round, balance, got)
		}
	}
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
