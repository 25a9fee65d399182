package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// A healthy single node at the default log level: started, 100 HTTP requests
// served, stopped. Its log has no WARN or ERROR line, no line per request,
// the ready line says where the UI, the API and the Kafka listener are, and
// the last line where the stop's time went.
func TestLogsQuietSingleNode(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	do := func(method, path, body string) {
		req, err := http.NewRequest(method, n.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	do("POST", "/v1/topics", `{"name":"quiet","partitions":2}`)
	paths := []string{"/v1/cluster", "/v1/topics", "/v1/topics/quiet", "/v1/groups", "/ui/", "/openapi.yaml",
		"/v1/topics/quiet/partitions/0/records?offset=earliest", "/livez", "/readyz"}
	for i := 0; i < 99; i++ {
		if i%3 == 0 {
			do("POST", "/v1/topics/quiet/records", fmt.Sprintf(`{"records":[{"key":"k%d","value":{"i":%d}}]}`, i, i))
			continue
		}
		do("GET", paths[i%len(paths)], "")
	}
	n.Stop()

	logs := n.Logs()
	var ready, closed string
	for line := range strings.Lines(logs) {
		switch {
		case strings.Contains(line, "level=WARN"), strings.Contains(line, "level=ERROR"):
			t.Errorf("a healthy node logged: %s", line)
		case strings.Contains(line, "msg=http "), strings.Contains(line, "path=/v1/"):
			t.Errorf("a request logged at the default level: %s", line)
		case strings.Contains(line, `msg="runnel ready"`):
			ready = line
		case strings.Contains(line, `msg="server closed"`):
			closed = line
		}
	}
	// The stop says where its time went, step by step.
	for _, want := range []string{"controlled_shutdown=", "http=", "kafka=", "partitions=", "metadata="} {
		if !strings.Contains(closed, want) {
			t.Errorf("stop line %q lacks %s", closed, want)
		}
	}
	for _, want := range []string{"ui=" + n.URL + "/ui/", "api=" + n.URL, "kafka=" + n.KafkaAddr} {
		if !strings.Contains(ready, want) {
			t.Errorf("ready line %q lacks %s", ready, want)
		}
	}
	if t.Failed() {
		t.Logf("node log:\n%s", logs)
	}
}
