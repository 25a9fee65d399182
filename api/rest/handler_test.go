package rest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

func TestTopicsAndCluster(t *testing.T) {
	e := newEnv(t)
	e.createTopic("orders", 3)
	long := strings.Repeat("a", 250)
	tests := []struct {
		name, method, path, body string
		status                   int
		problemType, field       string // for error responses
		check                    func(t *testing.T, r resp)
	}{
		{name: "cluster", method: "GET", path: "/v1/cluster", status: 200, check: func(t *testing.T, r resp) {
			var c api.Cluster
			r.json(t, &c)
			if c.ClusterID != "test-cluster" || len(c.Controllers) != 1 || c.Controllers[0].Role != "leader" || len(c.Brokers) != 1 {
				t.Fatalf("cluster %+v", c)
			}
		}},
		{name: "brokers", method: "GET", path: "/v1/brokers", status: 200, check: func(t *testing.T, r resp) {
			var bl api.BrokerList
			r.json(t, &bl)
			if len(bl.Brokers) != 1 || bl.Brokers[0].State != "alive" {
				t.Fatalf("brokers %+v", bl)
			}
		}},
		{name: "create", method: "POST", path: "/v1/topics", body: `{"name":"a.b_c-1","partitions":2,"configs":{"retention.ms":"1000"}}`, status: 201,
			check: func(t *testing.T, r resp) {
				var td api.TopicDetail
				r.json(t, &td)
				if td.Name != "a.b_c-1" || len(td.Partitions) != 2 || td.Configs["retention.ms"] != "1000" {
					t.Fatalf("created %+v", td)
				}
				if loc := r.header.Get("Location"); loc != "/v1/topics/a.b_c-1" {
					t.Fatalf("Location %q", loc)
				}
			}},
		{name: "create default partitions", method: "POST", path: "/v1/topics", body: `{"name":"dflt"}`, status: 201},
		{name: "create exists", method: "POST", path: "/v1/topics", body: `{"name":"orders"}`, status: 409, problemType: "topic-exists"},
		{name: "create bad chars", method: "POST", path: "/v1/topics", body: `{"name":"a b"}`, status: 400, problemType: "invalid-request", field: "body.name"},
		{name: "create dot", method: "POST", path: "/v1/topics", body: `{"name":"."}`, status: 400, problemType: "invalid-topic-name", field: "body.name"},
		{name: "create dotdot", method: "POST", path: "/v1/topics", body: `{"name":".."}`, status: 400, problemType: "invalid-topic-name", field: "body.name"},
		{name: "create dots ok", method: "POST", path: "/v1/topics", body: `{"name":"..."}`, status: 201},
		{name: "create too long", method: "POST", path: "/v1/topics", body: `{"name":"` + long + `"}`, status: 400, problemType: "invalid-request", field: "body.name"},
		{name: "create zero partitions", method: "POST", path: "/v1/topics", body: `{"name":"z","partitions":0}`, status: 400, field: "body.partitions"},
		{name: "create unknown field", method: "POST", path: "/v1/topics", body: `{"name":"z","colour":1}`, status: 400, problemType: "invalid-request"},
		{name: "create malformed", method: "POST", path: "/v1/topics", body: `{"name":`, status: 400, problemType: "malformed-json"},
		{name: "create no body", method: "POST", path: "/v1/topics", status: 400, problemType: "invalid-request", field: "body"},
		{name: "create bad config", method: "POST", path: "/v1/topics", body: `{"name":"z","configs":{"retention.ms":"soon"}}`, status: 400, problemType: "invalid-config"},
		{name: "list", method: "GET", path: "/v1/topics", status: 200, check: func(t *testing.T, r resp) {
			var tl api.TopicList
			r.json(t, &tl)
			var names []string
			for _, x := range tl.Topics {
				names = append(names, x.Name)
			}
			if got := strings.Join(names, ","); got != "...,a.b_c-1,dflt,orders" {
				t.Fatalf("topics %s", got)
			}
		}},
		{name: "describe", method: "GET", path: "/v1/topics/orders", status: 200, check: func(t *testing.T, r resp) {
			var td api.TopicDetail
			r.json(t, &td)
			if len(td.Partitions) != 3 || td.Partitions[2].Partition != 2 || td.Partitions[0].ISR[0] != 1 {
				t.Fatalf("describe %+v", td)
			}
		}},
		{name: "describe unknown", method: "GET", path: "/v1/topics/nope", status: 404, problemType: "unknown-topic"},
		{name: "describe bad name", method: "GET", path: "/v1/topics/a%20b", status: 400, field: "path.topic"},
		{name: "describe dotdot", method: "GET", path: "/v1/topics/%2E%2E", status: 400, problemType: "invalid-topic-name", field: "path.topic"},
		{name: "alter configs", method: "PATCH", path: "/v1/topics/a.b_c-1/configs", body: `{"configs":{"retention.ms":null,"cleanup.policy":"compact"}}`, status: 200,
			check: func(t *testing.T, r resp) {
				var td api.TopicDetail
				r.json(t, &td)
				if _, ok := td.Configs["retention.ms"]; ok || td.Configs["cleanup.policy"] != "compact" {
					t.Fatalf("configs %v", td.Configs)
				}
			}},
		{name: "alter bad value", method: "PATCH", path: "/v1/topics/orders/configs", body: `{"configs":{"retention.ms":"x"}}`, status: 400, problemType: "invalid-config"},
		{name: "alter non-string", method: "PATCH", path: "/v1/topics/orders/configs", body: `{"configs":{"retention.ms":5}}`, status: 400, field: "body.configs.retention.ms"},
		{name: "alter unknown topic", method: "PATCH", path: "/v1/topics/nope/configs", body: `{"configs":{}}`, status: 404, problemType: "unknown-topic"},
		{name: "delete", method: "DELETE", path: "/v1/topics/dflt", status: 204},
		{name: "delete again", method: "DELETE", path: "/v1/topics/dflt", status: 404, problemType: "unknown-topic"},
		{name: "unknown path", method: "GET", path: "/v1/nothing", status: 404, problemType: "not-found"},
		{name: "wrong method", method: "PUT", path: "/v1/topics", status: 405, problemType: "method-not-allowed"},
	}
	for _, tt := range tests { // in order: later cases see earlier effects
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body)
			mustStatus(t, r, tt.status)
			if tt.status >= 400 {
				p := r.problem(t)
				if tt.problemType != "" && p.Type != api.ProblemTypePrefix+tt.problemType {
					t.Fatalf("type %q, want %s; %+v", p.Type, tt.problemType, p)
				}
				if tt.field != "" && p.Field != tt.field {
					t.Fatalf("field %q, want %q; %+v", p.Field, tt.field, p)
				}
				if p.Status != tt.status || p.RequestID == "" || p.RequestID != r.header.Get(api.RequestIDHeader) {
					t.Fatalf("problem %+v, X-Request-ID %q", p, r.header.Get(api.RequestIDHeader))
				}
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestOpsEndpoints(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/livez", "")
	mustStatus(t, r, 200)
	mustStatus(t, e.do("GET", "/readyz", ""), 200)

	r = e.do("GET", "/openapi.yaml", "")
	mustStatus(t, r, 200)
	if string(r.body) != string(runnel.OpenAPISpec) {
		t.Fatal("/openapi.yaml is not the embedded spec")
	}

	r = e.do("GET", "/docs", "")
	mustStatus(t, r, 200)
	doc, _ := rest.LoadSpec()
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if !strings.Contains(string(r.body), `id="op-`+op.OperationID+`"`) {
				t.Errorf("/docs lacks %s (%s)", op.OperationID, path)
			}
		}
	}
	for _, k := range api.ProblemKinds() {
		if !strings.Contains(string(r.body), k.Type) {
			t.Errorf("/docs lacks problem type %s", k.Type)
		}
	}
	if strings.Contains(string(r.body), "http://") || strings.Contains(string(r.body), "https://") || strings.Contains(string(r.body), "<script") {
		t.Error("/docs must be self-contained: no external URL, no script")
	}

	r = e.do("GET", "/ui/topics/x", "")
	mustStatus(t, r, 200)
	if string(r.body) != "ui:/ui/topics/x" {
		t.Fatalf("ui got %q", r.body)
	}
	if r := e.do("GET", "/", ""); string(r.body) != "ui:/ui/" {
		t.Fatalf("/ does not lead to the UI: %d %q", r.status, r.body)
	}
}

func TestNotReady(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	e.b.setNotReady(errors.New("raft log replay at 40%"))
	r := e.do("GET", "/readyz", "")
	mustStatus(t, r, 503)
	if p := r.problem(t); p.Type != api.ProblemTypePrefix+"not-ready" || !strings.Contains(p.Detail, "40%") {
		t.Fatalf("problem %+v", p)
	}
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	mustStatus(t, e.do("POST", "/v1/topics", `{"name":"u"}`), 503)
	mustStatus(t, e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`), 503)
	mustStatus(t, e.do("DELETE", "/v1/topics/t", ""), 503)
	mustStatus(t, e.do("GET", "/v1/topics/t", ""), 200) // reads still served
	mustStatus(t, e.do("GET", "/livez", ""), 200)
	e.b.setNotReady(nil)
	mustStatus(t, e.do("GET", "/readyz", ""), 200)
}

func TestOptionalInterfaces(t *testing.T) {
	plain := newEnv(t, func(_ *rest.Options, b *memBackend) api.Backend { return b })
	for _, path := range []string{"/v1/stats/series", "/v1/kafka/api-versions"} {
		r := plain.do("GET", path, "")
		mustStatus(t, r, 501)
		if p := r.problem(t); p.Type != api.ProblemTypePrefix+"not-implemented" {
			t.Fatalf("%s: %+v", path, p)
		}
	}
	full := newEnv(t)
	var s api.Series
	r := full.do("GET", "/v1/stats/series", "")
	mustStatus(t, r, 200)
	r.json(t, &s)
	if s.IntervalMS != 10_000 || len(s.Topics) != 1 || len(s.Groups[0].Lag) != 2 {
		t.Fatalf("series %+v", s)
	}
	var kv api.KafkaAPIVersions
	r = full.do("GET", "/v1/kafka/api-versions", "")
	mustStatus(t, r, 200)
	r.json(t, &kv)
	if len(kv.APIVersions) != 2 || kv.APIVersions[1].Name != "ApiVersions" {
		t.Fatalf("api versions %+v", kv)
	}
}

// panicky panics in DescribeTopic, errors with something unknown in ListTopics.
type panicky struct{ *memBackend }

func (panicky) DescribeTopic(context.Context, string) (api.TopicDetail, error) { panic("boom") }
func (panicky) ListTopics(context.Context, api.ListQuery) (api.TopicPage, error) {
	return api.TopicPage{}, errors.New("disk on fire")
}

func TestInternalErrors(t *testing.T) {
	e := newEnv(t, func(_ *rest.Options, b *memBackend) api.Backend { return panicky{b} })
	for _, path := range []string{"/v1/topics/x", "/v1/topics"} {
		r := e.do("GET", path, "")
		mustStatus(t, r, 500)
		p := r.problem(t)
		if p.Type != api.ProblemTypePrefix+"internal" || strings.Contains(p.Detail, "fire") || strings.Contains(p.Detail, "boom") {
			t.Fatalf("%s: %+v (internal details must not leak)", path, p)
		}
	}
}

func TestErrorTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range api.ProblemKinds() {
		if seen[k.Type] {
			t.Errorf("duplicate problem type %s", k.Type)
		}
		seen[k.Type] = true
		if k.Err == nil {
			continue
		}
		wrapped := fmt.Errorf("server: %w", fmt.Errorf("%w: details", k.Err))
		if got := api.KindOf(wrapped); got.Type != k.Type || got.Status != k.Status {
			t.Errorf("%v maps to %s %d, want %s %d", k.Err, got.Type, got.Status, k.Type, k.Status)
		}
	}
	if got := api.KindOf(errors.New("other")); got.Status != 500 {
		t.Errorf("unknown error gives %d", got.Status)
	}
}

func TestRequestIDEcho(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/livez", "", api.RequestIDHeader, "abc-123")
	if got := r.header.Get(api.RequestIDHeader); got != "abc-123" {
		t.Fatalf("request id %q", got)
	}
	r = e.do("GET", "/livez", "", api.RequestIDHeader, "bad id with spaces")
	if got := r.header.Get(api.RequestIDHeader); got == "" || strings.Contains(got, " ") {
		t.Fatalf("request id %q", got)
	}
}

// TestRoutesMatchSpec: every spec operation is routed and every /v1 route is
// in the spec, so neither side can drift.
func TestRoutesMatchSpec(t *testing.T) {
	h, err := rest.NewHandler(fullBackend{newMemBackend()}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	err = chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/")
		if route == "" {
			route = "/"
		}
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := rest.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	inSpec := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			key := method + " " + path
			inSpec[key] = true
			if path == "/metrics" {
				continue // mounted only when a metrics handler exists
			}
			if !routed[key] {
				t.Errorf("spec operation %s has no route", key)
			}
		}
	}
	for key := range routed {
		if strings.Contains(key, " /v1") && !inSpec[key] {
			t.Errorf("route %s is not in openapi.yaml", key)
		}
	}
}

func TestMetricsExposed(t *testing.T) {
	e := newEnv(t)
	e.createTopic("m", 1)
	e.produce("m", "", `{"records":[{"value":"abc"}]}`)
	e.consume("m", 0, "")
	r := e.do("GET", "/metrics", "")
	mustStatus(t, r, 200)
	for _, want := range []string{
		`runnel_http_request_duration_seconds_count{code="201",method="POST",route="/v1/topics"} 1`,
		`runnel_http_produced_records_total{topic="m"} 1`,
		`runnel_http_produced_bytes_total{topic="m"} 5`,
		`runnel_http_consumed_records_total{topic="m"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Two handlers on one registry must fail loudly, not share counters.
	if _, err := rest.NewHandler(e.b, rest.Options{Registerer: e.reg}); err == nil {
		t.Error("second registration on one registry succeeded")
	}
}

// TestSlowBody: a client that stops sending its body gets 408 after
// BodyReadTimeout instead of holding a handler forever.
func TestSlowBody(t *testing.T) {
	e := newEnv(t, func(o *rest.Options, _ *memBackend) api.Backend {
		o.BodyReadTimeout = 100 * time.Millisecond
		return nil
	})
	res, err := postHalfBody(t, e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
}

// postHalfBody sends addr a POST /v1/topics whose body stops after 4 of
// its 100 bytes and returns the answer, waited for up to 10 s.
func postHalfBody(t *testing.T, addr string) (*http.Response, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// TestBodyReadEndsWithTheRequest: a body whose request's context ended
// before its read began (a stopping node's grace is over: the server ended
// every request's context, and cut the reads in flight) is not waited for
// BodyReadTimeout: starting the read set a deadline that overwrote the
// stop's cut, and a half-sent body held the stop.
func TestBodyReadEndsWithTheRequest(t *testing.T) {
	h, err := rest.NewHandler(fullBackend{newMemBackend()}, rest.Options{Registerer: prometheus.NewRegistry(), BodyReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	srv.Config.BaseContext = func(net.Listener) context.Context { return ended }
	srv.Start()
	defer srv.Close()
	res, err := postHalfBody(t, srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("no answer in 10 s (the body was waited for): %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
}
