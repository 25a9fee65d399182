package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/api/rest"
	"github.com/runnel/runnel/server/servertest"
)

var specRouter struct {
	once   sync.Once
	router routers.Router
	err    error
}

// apiClient talks to one node and validates every response against openapi.yaml.
type apiClient struct {
	t    testing.TB
	base string
}

func newAPIClient(t testing.TB, n *servertest.Node) *apiClient {
	specRouter.once.Do(func() { _, specRouter.router, specRouter.err = rest.NewSpecRouter() })
	if specRouter.err != nil {
		t.Fatalf("load openapi.yaml: %v", specRouter.err)
	}
	return &apiClient{t: t, base: n.URL}
}

// do sends a request and returns status and body; the response must match the spec.
func (c *apiClient) do(method, path, contentType string, body []byte) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	c.validate(req, body, resp, out)
	return resp.StatusCode, out
}

func (c *apiClient) validate(req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	c.t.Helper()
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := specRouter.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s: not in openapi.yaml: %v", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Fatalf("%s %s: response %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL, resp.StatusCode, err, body)
	}
}

// json sends v as JSON (nil: no body) and decodes the answer into out
// (when non-nil), failing unless the status is want.
func (c *apiClient) json(method, path string, v any, want int, out any) []byte {
	c.t.Helper()
	var body []byte
	ct := ""
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
		ct = "application/json"
	}
	status, resp := c.do(method, path, ct, body)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, resp)
	}
	if out != nil {
		if err := json.Unmarshal(resp, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, resp, err)
		}
	}
	return resp
}

// The response shapes tests decode are the api package's where it exports
// them (one set of wire types; every response is also validated against
// openapi.yaml).
type producedOffsets = api.ProduceResponse

type consumed struct {
	Records []struct {
		Partition int32             `json:"partition"`
		Offset    int64             `json:"offset"`
		Timestamp any               `json:"timestamp"`
		Key       *string           `json:"key"`
		Value     json.RawMessage   `json:"value"`
		Headers   map[string]string `json:"headers"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
}

type problem = api.Problem

// topicDetail is GET /v1/topics/{topic}.
type topicDetail = api.TopicDetail

// consumePage is GET .../partitions/{p}/records as the client generated
// from openapi.yaml reads it (values of any JSON type, headers as sent).
type consumePage = client.ConsumeResponse

// headerList is a consumed record's header_list (none: nil).
func headerList(r client.ConsumedRecord) []client.RecordHeader {
	if r.HeaderList == nil {
		return nil
	}
	return *r.HeaderList
}

func (c *apiClient) problem(method, path, ct string, body []byte, wantStatus int, wantTypeSuffix string) {
	c.t.Helper()
	status, resp := c.do(method, path, ct, body)
	if status != wantStatus {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, wantStatus, resp)
	}
	var p problem
	if err := json.Unmarshal(resp, &p); err != nil {
		c.t.Fatalf("%s %s: not problem+json: %s", method, path, resp)
	}
	if !strings.HasSuffix(p.Type, wantTypeSuffix) || p.Status != wantStatus {
		c.t.Fatalf("%s %s: problem %+v, want type ...%s status %d", method, path, p, wantTypeSuffix, wantStatus)
	}
	for _, pkg := range []string{"api: ", "raftfsm: ", "segments: ", "recordbatch: ", "kafkaproto: ", "server: "} {
		if strings.Contains(p.Detail, pkg) {
			c.t.Errorf("%s %s: problem detail %q names an internal package", method, path, p.Detail)
		}
	}
}
