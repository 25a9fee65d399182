package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

// env is one API handler over a memBackend behind a real HTTP server. Every
// response that do returns has been validated against openapi.yaml.
type env struct {
	t      *testing.T
	b      *memBackend
	srv    *httptest.Server
	reg    *prometheus.Registry
	router routers.Router
}

func newEnv(t *testing.T, tweak ...func(*rest.Options, *memBackend) api.Backend) *env {
	t.Helper()
	e := &env{t: t, b: newMemBackend(), reg: prometheus.NewRegistry()}
	opts := rest.Options{Registerer: e.reg, UI: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ui:"+r.URL.Path)
	})}
	var b api.Backend = fullBackend{e.b}
	for _, f := range tweak {
		if nb := f(&opts, e.b); nb != nil {
			b = nb
		}
	}
	h, err := rest.NewHandler(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, e.router, err = rest.NewSpecRouter(); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// resp is a finished response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r resp) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p api.Problem
	r.json(t, &p)
	return p
}

// do sends a request; hdr is alternating header names and values. A body with
// no Content-Type header is sent as application/json.
func (e *env) do(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, body: data}
	e.validate(req, r)
	return r
}

// validate checks a response against the spec operation of its request
// (requests outside the spec, such as /ui/ assets or 404 paths, are skipped).
func (e *env) validate(req *http.Request, r resp) {
	e.t.Helper()
	validateResponse(e.t, e.router, req, r)
}

// validateResponse checks r against the spec operation of req, as
// env.validate does.
func validateResponse(t testing.TB, router routers.Router, req *http.Request, r resp) {
	t.Helper()
	route, params, err := router.FindRoute(req)
	if err != nil {
		return
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	if mt == "text/html" || mt == "text/event-stream" || mt == api.MediaRecordBatch {
		opts.ExcludeResponseBody = true // kin-openapi has no decoder for these (headers are checked)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 r.status,
		Header:                 r.header,
		Options:                opts,
	}
	in.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Fatalf("%s %s: response %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, r.status, err, r.body)
	}
}

// mustStatus fails unless r has status want.
func mustStatus(t *testing.T, r resp, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
}

func (e *env) createTopic(name string, partitions int) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "partitions": partitions})
	mustStatus(e.t, e.do("POST", "/v1/topics", string(body)), http.StatusCreated)
}

// produce sends a JSON produce body and returns the offsets.
func (e *env) produce(topic, query, body string) []api.RecordOffset {
	e.t.Helper()
	r := e.do("POST", "/v1/topics/"+topic+"/records"+query, body)
	mustStatus(e.t, r, http.StatusOK)
	var out api.ProduceResponse
	r.json(e.t, &out)
	return out.Offsets
}

// consumed is a ConsumeResponse as a client sees it.
type consumed struct {
	Records []struct {
		Partition       int32             `json:"partition"`
		Offset          int64             `json:"offset"`
		Timestamp       int64             `json:"timestamp"`
		Key             *string           `json:"key"`
		Value           json.RawMessage   `json:"value"`
		Headers         map[string]string `json:"headers"`
		KeyEncoding     string            `json:"key_encoding"`
		ValueEncoding   string            `json:"value_encoding"`
		HeadersEncoding string            `json:"headers_encoding"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
	StartOffset   int64 `json:"start_offset"`
}

func (e *env) consume(topic string, partition int, query string) consumed {
	e.t.Helper()
	r := e.do("GET", "/v1/topics/"+topic+"/partitions/"+itoa(partition)+"/records"+query, "")
	mustStatus(e.t, r, http.StatusOK)
	var c consumed
	r.json(e.t, &c)
	return c
}

func itoa(n int) string { return strconv.Itoa(n) }

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Error(err)
	}
	return b
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
