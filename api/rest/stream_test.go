package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

type sseEvent struct{ id, event, data string }

// sseStream is an open SSE response read event by event.
type sseStream struct {
	t        *testing.T
	res      *http.Response
	cancel   context.CancelFunc
	r        *bufio.Reader
	comments []string
	retry    string
}

func (e *env) openStream(query string, hdr ...string) *sseStream {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/topics/s/records/stream"+query, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.validate(req, resp{status: res.StatusCode, header: res.Header})
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		e.t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{t: e.t, res: res, cancel: cancel, r: bufio.NewReader(res.Body)}
	e.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event (comments and retry lines are collected).
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("stream read: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
			s.comments = append(s.comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		case strings.HasPrefix(line, "retry: "):
			s.retry = line[7:]
		default:
			s.t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

type streamedRecord struct {
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Value     json.RawMessage `json:"value"`
}

func (s *sseStream) record() (streamedRecord, string) {
	s.t.Helper()
	ev := s.next()
	if ev.event != "record" {
		s.t.Fatalf("event %+v, want a record", ev)
	}
	var r streamedRecord
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		s.t.Fatal(err)
	}
	if !strings.HasPrefix(ev.id, fmt.Sprintf("%d:%d", r.Partition, r.Offset)) {
		s.t.Fatalf("event id %q does not start with its record %d:%d", ev.id, r.Partition, r.Offset)
	}
	return r, ev.id
}

func produceN(e *env, partition, n int, tag string) {
	e.t.Helper()
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"value":"%s-%d","partition":%d}`, tag, i, partition))
	}
	e.produce("s", "", `{"records":[`+strings.Join(recs, ",")+`]}`)
}

// TestStreamResume: disconnect mid-stream, produce more, reconnect with
// Last-Event-ID: every record is delivered exactly once across both streams.
func TestStreamResume(t *testing.T) {
	e := newEnv(t)
	e.createTopic("s", 2)
	produceN(e, 0, 5, "a")
	produceN(e, 1, 5, "b")

	seen := map[string]int{}
	s := e.openStream("?offset=earliest")
	var lastID string
	for range 6 {
		r, id := s.record()
		seen[fmt.Sprintf("%d:%d", r.Partition, r.Offset)]++
		lastID = id
	}
	if s.retry == "" {
		t.Fatal("no retry hint")
	}
	if n := strings.Count(lastID, ","); n != 1 {
		t.Fatalf("id %q should name both partitions", lastID)
	}
	s.close()
	waitFor(t, func() bool { return e.b.consumes.Load() == 0 }) // readers stopped

	produceN(e, 0, 3, "c")
	produceN(e, 1, 3, "d")
	s2 := e.openStream("?offset=earliest", "Last-Event-ID", lastID)
	for len(seen) < 16 {
		r, _ := s2.record()
		key := fmt.Sprintf("%d:%d", r.Partition, r.Offset)
		if seen[key] > 0 {
			t.Fatalf("record %s delivered twice", key)
		}
		seen[key]++
	}
	for p := range 2 {
		for o := range 8 {
			if seen[fmt.Sprintf("%d:%d", p, o)] != 1 {
				t.Fatalf("record %d:%d seen %d times", p, o, seen[fmt.Sprintf("%d:%d", p, o)])
			}
		}
	}
}

// TestStreamLatest: a stream from latest delivers only new records, and its
// ids name every partition from the first event, so a resume after it misses
// nothing even on partitions that had no event yet.
func TestStreamLatest(t *testing.T) {
	e := newEnv(t, func(o *rest.Options, _ *memBackend) api.Backend { o.Heartbeat = 20 * time.Millisecond; return nil })
	e.createTopic("s", 3)
	produceN(e, 0, 2, "old")
	produceN(e, 2, 4, "old")
	s := e.openStream("?partitions=0,2")
	waitFor(t, func() bool { return e.b.consumes.Load() == 2 })
	produceN(e, 0, 1, "new")
	r, id := s.record()
	if r.Partition != 0 || r.Offset != 2 || string(r.Value) != `"new-0"` {
		t.Fatalf("first streamed record %+v", r)
	}
	if id != "0:2,2:3" {
		t.Fatalf("id %q, want 0:2,2:3", id)
	}
	s.close()
	produceN(e, 2, 1, "later")
	s2 := e.openStream("?partitions=0,2", "Last-Event-ID", id)
	r, id = s2.record()
	if r.Partition != 2 || r.Offset != 4 || id != "2:4,0:2" {
		t.Fatalf("resumed with %+v id %q", r, id)
	}
	// Idle now: heartbeats keep the connection alive.
	stop := time.AfterFunc(5*time.Second, s2.close)
	defer stop.Stop()
	for beats := 0; beats < 2; {
		line, err := s2.r.ReadString('\n')
		if err != nil {
			t.Fatalf("no heartbeat while idle: %v", err)
		}
		if line == ": heartbeat\n" {
			beats++
		}
	}
}

func TestStreamErrors(t *testing.T) {
	e := newEnv(t)
	e.createTopic("s", 1)
	tests := []struct {
		name, query, lastID string
		status              int
		field               string
	}{
		{name: "unknown partition", query: "?partitions=0,5", status: 404, field: "query.partitions"},
		{name: "bad partitions", query: "?partitions=a", status: 400, field: "query.partitions"},
		{name: "bad Last-Event-ID", lastID: "zero", status: 400, field: "header.Last-Event-ID"},
		{name: "bad offset", query: "?offset=-1", status: 400, field: "query.offset"},
		{name: "beyond end", query: "?offset=10", status: 416},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.lastID != "" {
				hdr = []string{"Last-Event-ID", tt.lastID}
			}
			r := e.do("GET", "/v1/topics/s/records/stream"+tt.query, "", hdr...)
			mustStatus(t, r, tt.status)
			if p := r.problem(t); tt.field != "" && p.Field != tt.field {
				t.Fatalf("field %q want %q", p.Field, tt.field)
			}
		})
	}
	mustStatus(t, e.do("GET", "/v1/topics/gone/records/stream", ""), 404)

	// A failure after the stream started ends it with an error event.
	s := e.openStream("")
	waitFor(t, func() bool { return e.b.consumes.Load() == 1 })
	mustStatus(t, e.do("DELETE", "/v1/topics/s", ""), 204)
	ev := s.next()
	if ev.event != "error" || !strings.Contains(ev.data, "unknown-topic") {
		t.Fatalf("event %+v", ev)
	}
}

func TestEventID(t *testing.T) {
	last := map[int32]int64{0: 4, 1: -1, 7: 12}
	id := api.FormatEventID(7, []int32{0, 1, 7}, last)
	if id != "7:12,0:4,1:-1" {
		t.Fatalf("id %q", id)
	}
	got, err := api.ParseEventID(id)
	if err != nil || len(got) != 3 || got[7] != 12 || got[1] != -1 {
		t.Fatalf("parsed %v %v", got, err)
	}
	for _, bad := range []string{"", "1", "1:", "a:1", "1:-2", "-1:3", "1:2,,"} {
		if _, err := api.ParseEventID(bad); err == nil {
			t.Errorf("ParseEventID(%q) accepted", bad)
		}
	}
}
