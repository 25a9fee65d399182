package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkHTTPAuthCost: GET /v1/topics/{t} on one node with --auth
// required, authenticated with Basic (a SCRAM-SHA-256 derivation, 4096
// PBKDF2 iterations, per request) and with a Bearer token (one SHA-256),
// both as the bootstrap superuser: the ratio is what to read.
func BenchmarkHTTPAuthCost(b *testing.B) {
	const pwd = "bench-pw"
	n := servertest.Start(b, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(b, pwd)}})
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(set func(*http.Request), method, path string, body io.Reader) []byte {
		req, _ := http.NewRequest(method, n.URL+path, body)
		set(req)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	basic := func(r *http.Request) { r.SetBasicAuth("admin", pwd) }
	do(basic, http.MethodPost, "/v1/topics", strings.NewReader(`{"name":"bench","partitions":1}`))
	var tok api.NewToken
	if err := json.Unmarshal(do(basic, http.MethodPost, "/v1/tokens", nil), &tok); err != nil {
		b.Fatal(err)
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok.Token) }
	run := func(set func(*http.Request)) float64 {
		start := time.Now()
		for range b.N {
			do(set, http.MethodGet, "/v1/topics/bench", nil)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	b.ResetTimer()
	tokenNs := run(bearer)
	basicNs := run(basic)
	b.ReportMetric(tokenNs, "bearer_ns/req")
	b.ReportMetric(basicNs, "basic_ns/req")
	b.ReportMetric(basicNs/tokenNs, "basic_vs_bearer_ratio")
}
