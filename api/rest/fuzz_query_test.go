package rest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnel/runnel/api/rest"
)

// queryTargets are the requests FuzzQueryParameters sends its query string
// with: the operations that read query parameters of their own. A consume
// gets wait_ms=0 first (the value the handler reads), so that no input
// long-polls.
var queryTargets = []struct{ method, path, prefix, body string }{
	{"GET", "/v1/topics", "", ""},
	{"GET", "/v1/topics/orders/partitions/0/records", "wait_ms=0&", ""},
	{"GET", "/v1/topics/orders/partitions/1/records", "wait_ms=0&", ""},
	{"POST", "/v1/topics/orders/records", "", `{"records":[{"key":"k","value":{"a":1}}]}`},
	{"GET", "/v1/groups", "", ""},
	{"GET", "/v1/groups/g/members/" + fuzzMember + "/records", "wait_ms=0&", ""},
}

// fuzzMember is the member id groupsBackend gives the first member to join.
const fuzzMember = "m0@192.0.2.1"

// FuzzQueryParameters sends arbitrary query strings to the operations that
// take query parameters, through the whole handler (the spec's request
// validation, then the operation's own parsing): every answer is one that
// openapi.yaml allows for the operation, and none is a 500 (an internal
// error: a panic, or a parse the handler did not expect to fail).
func FuzzQueryParameters(f *testing.F) {
	b := &groupsBackend{fullBackend: fullBackend{newMemBackend()}, offsets: map[string]map[string]int64{}, members: map[string]string{}}
	h, err := rest.NewHandler(b, rest.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		f.Fatal(err)
	}
	_, router, err := rest.NewSpecRouter()
	if err != nil {
		f.Fatal(err)
	}
	serve := func(t testing.TB, method, target, body string) (*http.Request, resp) {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return req, resp{status: res.StatusCode, header: res.Header, body: data}
	}
	if _, r := serve(f, "POST", "/v1/topics", `{"name":"orders","partitions":2}`); r.status != http.StatusCreated {
		f.Fatalf("create: %d %s", r.status, r.body)
	}
	for range 3 {
		if _, r := serve(f, "POST", "/v1/topics/orders/records?partition=0", `{"records":[{"key":"k","value":"v"},{"value":{"n":[1,2]}}]}`); r.status != http.StatusOK {
			f.Fatalf("produce: %d %s", r.status, r.body)
		}
	}
	if _, r := serve(f, "POST", "/v1/groups/g/members", `{"topics":["orders"]}`); r.status != http.StatusOK || !strings.Contains(string(r.body), fuzzMember) {
		f.Fatalf("join: %d %s", r.status, r.body)
	}
	for _, q := range []string{
		"", "limit=1", "prefix=or&limit=0", "cursor=%ff%00", "offset=1&max_records=1&encoding=base64",
		"offset=latest&timestamp=5", "timestamp=-1&isolation=read_committed&include_control=true",
		"offset=99999999999999999999&max_bytes=0", "acks=all&partition=1", "acks=2&partition=-1",
		"max_records=0&wait_ms=60001", "a=1;b=2", "%zz=1", "encoding=json&encoding=string",
	} {
		for i := range queryTargets {
			f.Add(uint8(i), q)
		}
	}
	f.Fuzz(func(t *testing.T, sel uint8, query string) {
		qt := queryTargets[int(sel)%len(queryTargets)]
		target := qt.path + "?" + qt.prefix + query
		if _, err := url.ParseRequestURI(target); err != nil || strings.ContainsAny(target, " #") {
			return // not a request target a client can send
		}
		req, r := serve(t, qt.method, target, qt.body)
		if r.status == http.StatusInternalServerError {
			t.Fatalf("%s %s: 500 %s", qt.method, target, r.body)
		}
		validateResponse(t, router, req, r)
	})
}
