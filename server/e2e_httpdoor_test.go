package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// The plaintext HTTP port speaks HTTP/2 with prior knowledge (h2c): a
// client that only speaks h2c produces and consumes over one connection.
func TestHTTPDoorH2C(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer client.CloseIdleConnections()
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, n.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s over h2c: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 || resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s %d %s", method, path, resp.Proto, resp.StatusCode, data)
		}
		return string(data)
	}
	do("POST", "/v1/topics", `{"name":"h2c","partitions":1}`)
	do("POST", "/v1/topics/h2c/records?encoding=string", `{"records":[{"value":"over h2c"}]}`)
	if got := do("GET", "/v1/topics/h2c/partitions/0/records?encoding=string", ""); !strings.Contains(got, `"value":"over h2c"`) {
		t.Fatalf("consumed %s", got)
	}
}
