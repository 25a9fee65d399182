package rest_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

func wantRetryAfter(t *testing.T, r resp, status int, problemType string) {
	t.Helper()
	mustStatus(t, r, status)
	if p := r.problem(t); p.Type != api.ProblemTypePrefix+problemType {
		t.Fatalf("problem %+v, want %s", p, problemType)
	}
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("%d without Retry-After", status)
	}
}

// waitingBackend says when a waiting Consume has reached the backend.
type waitingBackend struct {
	fullBackend
	waiting chan struct{}
}

func (b waitingBackend) Consume(ctx context.Context, req api.ConsumeRequest) (api.ConsumeResult, error) {
	if req.Wait > 0 {
		b.waiting <- struct{}{}
	}
	return b.fullBackend.Consume(ctx, req)
}

// TestLongPollLimit: long polls over the per-client limit are answered 429
// with Retry-After while the others wait; non-waiting consumes still work.
func TestLongPollLimit(t *testing.T) {
	waiting := make(chan struct{}, 2)
	e := newEnv(t, func(o *rest.Options, mb *memBackend) api.Backend {
		o.Limits.MaxLongPollsPerClient = 2
		return waitingBackend{fullBackend{mb}, waiting}
	})
	e.createTopic("lp", 1)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/topics/lp/partitions/0/records?wait_ms=30000", nil)
			if res, err := e.srv.Client().Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	<-waiting // both polls hold their slots
	<-waiting
	wantRetryAfter(t, e.do("GET", "/v1/topics/lp/partitions/0/records?wait_ms=30000", ""), 429, "too-many-requests")
	mustStatus(t, e.do("GET", "/v1/topics/lp/partitions/0/records", ""), 200)
	cancel()
	wg.Wait()
}

// TestStreamLimit: SSE streams over the per-client limit are refused.
func TestStreamLimit(t *testing.T) {
	e := newEnv(t, func(o *rest.Options, _ *memBackend) api.Backend {
		o.Limits.MaxStreamsPerClient = 1
		return nil
	})
	e.createTopic("s", 2)
	s := e.openStream("")
	wantRetryAfter(t, e.do("GET", "/v1/topics/s/records/stream", ""), 429, "too-many-requests")
	s.close()
}

// TestMemoryBudget: a body larger than the free budget is refused 503
// before it is read; a consume's max_bytes shrinks to what is free.
func TestMemoryBudget(t *testing.T) {
	e := newEnv(t, func(o *rest.Options, _ *memBackend) api.Backend {
		o.MaxBodyBytes = 8 << 20
		o.Limits.MemoryBudget = 1 << 20
		return nil
	})
	e.createTopic("m", 1)
	big := `{"records":[{"value":"` + strings.Repeat("x", 2<<20) + `"}]}`
	wantRetryAfter(t, e.do("POST", "/v1/topics/m/records?encoding=string", big), 503, "overloaded")
	// A body that fits, but not with its decoded records (3x): refused too.
	mid := `{"records":[{"value":"` + strings.Repeat("x", 400<<10) + `"}]}`
	wantRetryAfter(t, e.do("POST", "/v1/topics/m/records?encoding=string", mid), 503, "overloaded")
	e.produce("m", "?encoding=string", `{"records":[{"value":"small"}]}`)
	c := e.consume("m", 0, "?max_bytes=67108864")
	if len(c.Records) != 1 {
		t.Fatalf("consume with max_bytes above the budget: %+v", c)
	}
}

// TestConnLimiter: a connection over the per-client limit is answered 429
// problem+json and closed; once one closes, a new one is served.
func TestConnLimiter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := rest.NewConnLimiter(rest.Limits{MaxConnectionsPerClient: 1}, nil)
	srv := &httptest.Server{Listener: cl.Listener(ln, true), Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}}
	srv.Start()
	defer srv.Close()
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first connection: %v %v", res, err)
	}
	second, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err = http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil || res.StatusCode != 429 || res.Header.Get("Retry-After") == "" ||
		res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("second connection: %+v %v", res, err)
	}
	first.Close()
	// The slot comes back when the server sees the close; retry (bounded).
	for i := 0; ; i++ {
		res, err := http.Get(srv.URL)
		if err == nil && res.StatusCode == 200 {
			res.Body.Close()
			break
		}
		if err == nil {
			res.Body.Close()
		}
		if i > 100 {
			t.Fatalf("no connection accepted after the first closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
