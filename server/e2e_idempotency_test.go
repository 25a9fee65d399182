package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// keyedProduce posts body to topic with an Idempotency-Key through node
// url and returns the status and the answer.
func keyedProduce(client *http.Client, url, topic, key, query string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest("POST", url+"/v1/topics/"+topic+"/records?"+query, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", strconv.Quote(key))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// recordsBody is a produce body of n string records: keyed ones (spread
// by the partitioner), and one without key or partition.
func recordsBody(prefix string, n int) []byte {
	var recs []map[string]any
	for j := range n {
		recs = append(recs, map[string]any{"key": fmt.Sprintf("%s-k%d", prefix, j), "value": fmt.Sprintf("%s-%d", prefix, j)})
	}
	recs = append(recs, map[string]any{"value": prefix + "-nokey"})
	b, _ := json.Marshal(map[string]any{"records": recs})
	return b
}

// A retry with the same Idempotency-Key and body gets the first answer and
// writes nothing, also after a kill -9 and restart of the node; the same
// key with another body is a 422; a malformed key a 400 (issue 16).
func TestIdempotentProduceRetryAndRestart(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	httpCreateTopic(t, n, "idem", 4)
	c := newAPIClient(t, n)
	client := &http.Client{Timeout: 30 * time.Second}
	body := recordsBody("a", 8)
	const q = "encoding=string"

	status, first, err := keyedProduce(client, n.URL, "idem", "key-1", q, body)
	if err != nil || status != 200 {
		t.Fatalf("first: %d %s %v", status, first, err)
	}
	ends := endOffsets(t, c, "idem")
	retry := func(when string) {
		t.Helper()
		status, again, err := keyedProduce(client, n.URL, "idem", "key-1", q, body)
		if err != nil || status != 200 || !bytes.Equal(again, first) {
			t.Fatalf("retry %s: %d %s %v, want 200 %s", when, status, again, err, first)
		}
		if got := endOffsets(t, c, "idem"); fmt.Sprint(got) != fmt.Sprint(ends) {
			t.Fatalf("retry %s wrote: end offsets %v, were %v", when, got, ends)
		}
	}
	retry("at once")

	// The same key with another body (or encoding) is refused, writes
	// nothing, and the original still answers.
	req := func(key, query string, body []byte) *http.Request {
		r, _ := http.NewRequest("POST", n.URL+"/v1/topics/idem/records?"+query, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		return r
	}
	for _, r := range []*http.Request{req(`"key-1"`, q, recordsBody("b", 8)), req("key-1", q, recordsBody("a", 7)),
		req("key-1", "encoding=json", body)} {
		c.problemReq(r, 422, "idempotency-key-reused")
	}
	c.problemReq(req(strings.Repeat("x", 300), q, body), 400, "invalid-request")
	c.problemReq(req(`"unterminated`, q, body), 400, "invalid-request")
	retry("after a reused key")

	n.Kill()
	n.Start()
	retry("after kill -9 and restart")
	n.Stop()
	n.Start()
	retry("after a clean restart")
	resp, err := client.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `runnel_idempotent_replays_total{topic="idem"}`) {
		t.Error("/metrics has no runnel_idempotent_replays_total for the topic")
	}

	// A new key writes again.
	if status, out, err := keyedProduce(client, n.URL, "idem", "key-2", q, body); err != nil || status != 200 || bytes.Equal(out, first) {
		t.Fatalf("new key: %d %s %v", status, out, err)
	}
}

// problemReq sends r and checks its problem answer (validated against
// openapi.yaml).
func (c *apiClient) problemReq(r *http.Request, wantStatus int, wantTypeSuffix string) {
	c.t.Helper()
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		c.t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.validate(r, body, resp, out)
	var p problem
	if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != wantStatus || p.Status != wantStatus || !strings.HasSuffix(p.Type, wantTypeSuffix) {
		c.t.Fatalf("%s %s: %d %s, want %d ...%s", r.Method, r.URL, resp.StatusCode, out, wantStatus, wantTypeSuffix)
	}
}

// A retry that arrives while its original is still being served is told
// so (409), as the IETF draft asks; once the original is answered the
// retry gets its answer.
func TestIdempotentProduceInFlight(t *testing.T) {
	_, leader, follower, _ := replicatedPair(t, "inflight")
	follower.Signal(syscall.SIGSTOP) // acks=all waits for it
	t.Cleanup(func() { follower.Signal(syscall.SIGCONT) })
	body := recordsBody("x", 1)
	client := &http.Client{Timeout: 90 * time.Second}
	c := newAPIClient(t, leader)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		s, b, err := keyedProduce(client, leader.URL, "inflight", "slow", "encoding=string&acks=all", body)
		done <- answer{s, b, err}
	}()
	servertest.WaitFor(t, 30*time.Second, "the first request appended", func() bool {
		return endOffsets(t, c, "inflight")[0] == 2
	})
	r, _ := http.NewRequest("POST", leader.URL+"/v1/topics/inflight/records?encoding=string&acks=all", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", `"slow"`)
	c.problemReq(r, 409, "idempotency-key-in-flight")

	follower.Signal(syscall.SIGCONT)
	first := <-done
	// On a slow machine the paused follower may be fenced first and the
	// original answered with an error; its record is then stored all the
	// same, and the retry below must find it.
	var (
		s     int
		again []byte
		err   error
	)
	servertest.WaitFor(t, 60*time.Second, "the retry answered (the follower back in sync)", func() bool {
		s, again, err = keyedProduce(client, leader.URL, "inflight", "slow", "encoding=string&acks=all", body)
		return err != nil || s != 503
	})
	if err != nil || s != 200 || (first.status == 200 && !bytes.Equal(again, first.body)) {
		t.Fatalf("retry after the answer: %d %s %v; original %d %s %v", s, again, err, first.status, first.body, first.err)
	}
	if got := endOffsets(t, c, "inflight")[0]; got != 2 {
		t.Fatalf("end offset %d, want 2", got)
	}
}

// Exactly once across a leader kill -9: clients retry every produce that
// was not answered (and some that were) with its Idempotency-Key, against
// any node, while the leader of a partition is killed; afterwards every
// record is in the log exactly once, at the offset its answer gave
// (issue 16). RUNNEL_SOAK=1 (or make chaos) runs 10,000 requests and
// three kills.
func TestIdempotentProduceAcrossLeaderKill(t *testing.T) {
	requests, perRequest, kills := 2_000, 5, 1
	if os.Getenv("RUNNEL_SOAK") != "" || os.Getenv("RUNNEL_CHAOS") != "" {
		requests, kills = 10_000, 3
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	n1 := c.Node(1)
	createTopic := newAPIClient(t, n1)
	createTopic.json("POST", "/v1/topics", map[string]any{"name": "once", "partitions": 3, "replication_factor": 3,
		"configs": map[string]string{"min.insync.replicas": "2"}}, 201, nil)
	servertest.WaitFor(t, 30*time.Second, "every replica in sync", func() bool {
		ps, ok := describe(n1, "once")
		for _, p := range ps {
			ok = ok && len(p.ISR) == 3 && p.Leader > 0
		}
		return ok && len(ps) == 3
	})

	var (
		alive   [4]atomic.Bool
		mu      sync.Mutex
		answers = map[string]producedOffsets{} // value -> its request's answer
		where   = map[string][2]int64{}        // value -> partition, offset
		sent    atomic.Int64
		retried atomic.Int64
	)
	for id := 1; id <= 3; id++ {
		alive[id].Store(true)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// produce sends request i until it is answered 200 (bounded).
	produce := func(i int) (producedOffsets, []byte) {
		key := fmt.Sprintf("req-%d", i)
		recs := make([]map[string]any, perRequest)
		for j := range recs {
			recs[j] = map[string]any{"key": fmt.Sprintf("k%d-%d", i, j), "value": fmt.Sprintf("v%d-%d", i, j)}
		}
		body, _ := json.Marshal(map[string]any{"records": recs})
		deadline := time.Now().Add(90 * time.Second)
		for try := 0; time.Now().Before(deadline); try++ {
			id := 1 + (i+try)%3
			if !alive[id].Load() {
				continue
			}
			if try > 0 {
				retried.Add(1)
			}
			sent.Add(1)
			status, out, err := keyedProduce(client, c.Node(id).URL, "once", key, "encoding=string&acks=all", body)
			if err == nil && status == 200 {
				var res producedOffsets
				if err := json.Unmarshal(out, &res); err != nil || len(res.Offsets) != perRequest {
					t.Errorf("request %d: answer %s", i, out)
				}
				return res, out
			}
			if err == nil && status/100 == 4 && status != 409 && status != 429 {
				// 5xx (no leader yet, timeouts) and 409 (the
				// previous try still served) are retried.
				t.Errorf("request %d via node %d: %d %s", i, id, status, out)
				return producedOffsets{}, nil
			}
			time.Sleep(20 * time.Millisecond) // back off while leadership moves; orders nothing
		}
		t.Errorf("request %d never answered", i)
		return producedOffsets{}, nil
	}

	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < requests && !t.Failed(); i = int(next.Add(1)) - 1 {
				res, raw := produce(i)
				if i%4 == 0 && raw != nil {
					// A retry of an answered request: same answer, no write.
					if _, raw2 := produce(i); !bytes.Equal(raw, raw2) {
						t.Errorf("request %d: retry answered %s, first %s", i, raw2, raw)
					}
				}
				mu.Lock()
				for j, o := range res.Offsets {
					v := fmt.Sprintf("v%d-%d", i, j)
					answers[v] = res
					where[v] = [2]int64{int64(o.Partition), o.Offset}
				}
				mu.Unlock()
			}
		}()
	}
	for k := range kills {
		servertest.WaitFor(t, 120*time.Second, "progress before the kill", func() bool {
			return next.Load() > int64(requests*(k+1)/(kills+2))
		})
		victim := 0
		servertest.WaitFor(t, 60*time.Second, "a leader of once-0 to kill", func() bool {
			for id := 1; id <= 3 && victim == 0; id++ {
				if ps, ok := describe(c.Node(id), "once"); alive[id].Load() && ok && len(ps) == 3 && ps[0].Leader > 0 && alive[ps[0].Leader].Load() {
					victim = int(ps[0].Leader)
				}
			}
			return victim != 0
		})
		alive[victim].Store(false)
		c.Node(victim).Kill()
		t.Logf("killed node %d (leader of once-0) after %d requests", victim, next.Load())
		if k+1 < kills {
			c.Node(victim).Start()
			alive[victim].Store(true)
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every record exactly once, where its answer said.
	var reader *servertest.Node
	for id := 1; id <= 3; id++ {
		if alive[id].Load() {
			reader = c.Node(id)
		}
	}
	seen := map[string]int{}
	for part := range 3 {
		for off, v := range readPartition(t, reader, "once", part) {
			seen[v]++
			if w, ok := where[v]; !ok || w != [2]int64{int64(part), off} {
				t.Errorf("%s at %d/%d, answered at %v", v, part, off, w)
			}
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s stored %d times", v, n)
		}
	}
	if len(seen) != requests*perRequest {
		t.Errorf("%d distinct records stored, want %d", len(seen), requests*perRequest)
	}
	t.Logf("%d requests of %d records: %d sends, %d retries; each record stored once", requests, perRequest, sent.Load(), retried.Load())

	// A used key with another body is a 422 through every node, also when
	// the partitions it wrote to are led by another node (forwarded).
	for id := 1; id <= 3; id++ {
		if !alive[id].Load() {
			continue
		}
		other, _ := json.Marshal(map[string]any{"records": []map[string]any{
			{"key": "k1-0", "value": "other"}, {"key": "k1-1", "value": "other"}, {"key": "k1-2", "value": "other"}}})
		status, out, err := keyedProduce(client, c.Node(id).URL, "once", "req-1", "encoding=string&acks=all", other)
		if err != nil || status != 422 || !strings.Contains(string(out), "idempotency-key-reused") {
			t.Errorf("reused key through node %d: %d %s %v", id, status, out, err)
		}
	}
}

// readPartition reads one partition through node n from the start.
func readPartition(t *testing.T, n *servertest.Node, topic string, part int) map[int64]string {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	out := map[int64]string{}
	next := int64(0)
	for range 100_000 {
		resp, err := client.Get(fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&encoding=string&max_records=1000", n.URL, topic, part, next))
		if err != nil {
			t.Fatal(err)
		}
		var got consumed
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got.Records {
			var v string
			json.Unmarshal(r.Value, &v)
			out[r.Offset] = v
		}
		next = got.NextOffset
		if len(got.Records) == 0 || next >= got.HighWatermark {
			return out
		}
	}
	return out
}

// A key is forgotten after --idempotency-key-expiration: the same request
// then writes again.
func TestIdempotencyKeyExpires(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--idempotency-key-expiration", "1s"}})
	httpCreateTopic(t, n, "expire", 1)
	client := &http.Client{Timeout: 30 * time.Second}
	body := []byte(`{"records":[{"value":"once","partition":0}]}`)
	status, first, err := keyedProduce(client, n.URL, "expire", "k", "encoding=string", body)
	if err != nil || status != 200 {
		t.Fatalf("first: %d %s %v", status, first, err)
	}
	servertest.WaitFor(t, 30*time.Second, "the key forgotten", func() bool {
		status, again, err := keyedProduce(client, n.URL, "expire", "k", "encoding=string", body)
		if err != nil || status != 200 {
			t.Fatalf("retry: %d %s %v", status, again, err)
		}
		return !bytes.Equal(again, first)
	})
}
