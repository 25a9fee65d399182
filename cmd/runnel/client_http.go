package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
)

// maxResponseBytes bounds how much of one response body the CLI reads, so a
// misbehaving server cannot make it allocate without limit.
const maxResponseBytes = 256 << 20

// errBadServerURL reports an unusable --server value.
var errBadServerURL = errors.New("invalid --server URL")

// apiClient talks to one runnel server's REST API. It is safe for concurrent
// use: it holds no per-request state.
type apiClient struct {
	base    *url.URL
	hc      *http.Client
	timeout time.Duration // deadline of one request, added to any long-poll wait
	// unavailableFor is how long a request is retried while the server answers
	// 503 (not ready, not the leader or controller yet): a 503 means the
	// server did not act on it, so repeating it cannot duplicate anything.
	unavailableFor time.Duration
	// authorize adds the credentials (--user/--password-file or --token)
	// to each request; nil: anonymous.
	authorize func(*http.Request)
}

// newAPIClient returns a client for server ("host:port" or an http(s) URL).
func newAPIClient(server string, timeout time.Duration) (*apiClient, error) {
	base, err := parseServerURL(server)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 128, // consume -f holds one long poll per partition
		IdleConnTimeout:     60 * time.Second,
	}
	// No http.Client.Timeout: each request carries its own context deadline,
	// which for a long poll is the poll's wait plus the request timeout.
	return &apiClient{base: base, hc: &http.Client{Transport: tr}, timeout: timeout,
		unavailableFor: 10 * time.Second}, nil
}

// parseServerURL accepts "host:port", "http://host:port" or "https://host/prefix".
func parseServerURL(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", errBadServerURL)
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadServerURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: scheme %q is not http or https", errBadServerURL, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %q has no host", errBadServerURL, s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// problemError is an RFC 9457 problem document (or a stand-in built from a
// non-problem error response).
type problemError struct {
	api.Problem // as the server writes it
	method      string
	path        string
}

func (e *problemError) Error() string {
	var b strings.Builder
	b.WriteString(e.Title)
	if e.Title == "" {
		b.WriteString(http.StatusText(e.Status))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " [field %s]", e.Field)
	}
	fmt.Fprintf(&b, " (HTTP %d", e.Status)
	if e.method != "" {
		fmt.Fprintf(&b, " from %s %s", e.method, e.path)
	}
	b.WriteString(")")
	return b.String()
}

// apiRequest is one call to the API.
type apiRequest struct {
	method string
	path   string // already escaped, e.g. "/v1/topics/" + url.PathEscape(name)
	query  url.Values
	body   any           // marshalled as JSON when non-nil
	wait   time.Duration // long-poll wait the server may hold the request for
}

// do sends req and returns the raw body of a 2xx response. A non-2xx response
// becomes a *problemError. 503 answers are retried for up to unavailableFor.
func (c *apiClient) do(ctx context.Context, req apiRequest) ([]byte, error) {
	start, pause := time.Now(), 50*time.Millisecond
	for {
		raw, err := c.doOnce(ctx, req)
		var p *problemError
		if err == nil || !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable ||
			time.Since(start)+pause > c.unavailableFor {
			return raw, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return raw, err
		}
		pause = min(2*pause, time.Second)
	}
}

func (c *apiClient) doOnce(ctx context.Context, req apiRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+req.wait)
	defer cancel()
	hreq, err := c.newRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, c.transportError(req, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading response: %w", req.method, req.path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, decodeProblem(resp.StatusCode, resp.Header.Get("Content-Type"), raw, req)
	}
	return raw, nil
}

// getJSON calls req and decodes the response into out; it also returns the raw
// body so that -o json can print exactly what the server said.
func (c *apiClient) getJSON(ctx context.Context, req apiRequest, out any) ([]byte, error) {
	raw, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return raw, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("%s %s: decoding response: %w", req.method, req.path, err)
	}
	return raw, nil
}

func (c *apiClient) newRequest(ctx context.Context, req apiRequest) (*http.Request, error) {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + req.path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	u.Path = p
	u.RawQuery = req.query.Encode()
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding request: %w", req.method, req.path, err)
		}
		body = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	hreq.Header.Set("Accept", "application/json, application/problem+json")
	hreq.Header.Set("User-Agent", "runnel-cli")
	if c.authorize != nil {
		c.authorize(hreq)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	return hreq, nil
}

// decodeProblem turns an error response into a *problemError, falling back to
// the status text and the start of the body when it is not problem+json.
func decodeProblem(status int, contentType string, raw []byte, req apiRequest) *problemError {
	p := &problemError{}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/problem+json" || mt == "application/json" {
		_ = json.Unmarshal(raw, p) // best effort: a bad body still yields the status
	}
	if p.Title == "" && p.Detail == "" {
		p.Title = http.StatusText(status)
		p.Detail = snippet(raw, 200)
	}
	p.Status, p.method, p.path = status, req.method, req.path
	return p
}

// snippet returns the first n bytes of b as one trimmed line.
func snippet(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// transportError wraps a failure to get any response; when nothing answered
// at all it says which server was tried and how to pick another.
func (c *apiClient) transportError(req apiRequest, err error) error {
	err = unwrapURLError(err)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%s %s: cannot reach %s (set --server or RUNNEL_SERVER): %w",
			req.method, req.path, c.base.Redacted(), err)
	}
	return fmt.Errorf("%s %s: %w", req.method, req.path, err)
}

// unwrapURLError drops *url.Error's repetition of method and URL, which the
// caller already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// trustCA adds the PEM certificates in file to the CAs this client trusts
// for HTTPS (the system's stay trusted).
func (c *apiClient) trustCA(file string) error {
	pem, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("--ca-file: %s holds no PEM certificate", file)
	}
	tr, ok := c.hc.Transport.(*http.Transport)
	if !ok {
		return fmt.Errorf("--ca-file: unexpected HTTP transport %T", c.hc.Transport)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return nil
}
