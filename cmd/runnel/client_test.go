package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// newTestRoot builds a root command carrying only the client subcommands, as
// main.go wires them.
func newTestRoot(server string, stdout, stderr *bytes.Buffer) *cobra.Command {
	root := &cobra.Command{Use: "runnel", SilenceUsage: true, SilenceErrors: true}
	var g globalFlags
	g.register(root.PersistentFlags())
	root.AddCommand(newClientCommands(&g)...)
	root.SetArgs([]string{"--server", server})
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(strings.NewReader(""))
	return root
}

func TestGlobalFlagsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, env, want string
	}{
		{"default", "", "http://localhost:8080"},
		{"env", "http://10.0.0.1:9000", "http://10.0.0.1:9000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RUNNEL_SERVER", tc.env)
			root := &cobra.Command{Use: "runnel"}
			var g globalFlags
			g.register(root.PersistentFlags())
			if g.Server != tc.want || g.Output != outputTable {
				t.Fatalf("server %q output %q, want %q table", g.Server, g.Output, tc.want)
			}
		})
	}
}

// TestArgumentErrors runs commands whose arguments are wrong: each must fail
// before any request, so the server below must never be called.
func TestArgumentErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"topic", "create"}, "accepts 1 arg"},
		{[]string{"topic", "create", "t", "-c", "novalue"}, "key=value"},
		{[]string{"topic", "create", "t", "-p", "0"}, "--partitions must be at least 1"},
		{[]string{"topic", "create", "t", "-r", "0"}, "--replication-factor must be at least 1"},
		{[]string{"topic", "alter-config", "t"}, "nothing to change"},
		{[]string{"topic", "alter-config", "t", "-c", "a=1", "--delete", "a"}, "both set and deleted"},
		{[]string{"topic", "list", "-o", "yaml"}, "--output must be table or json"},
		{[]string{"topic", "describe", "a", "b"}, "accepts 1 arg"},
		{[]string{"produce", "t", "--encoding", "xml"}, "--encoding must be"},
		{[]string{"produce", "t", "--batch-size", "0"}, "--batch-size"},
		{[]string{"produce", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "t", "-i", "/nonexistent/file"}, "no such file"},
		{[]string{"consume", "t", "-p", "x"}, "--partition must be"},
		{[]string{"consume", "t", "--offset", "-3"}, "--offset must be"},
		{[]string{"consume", "t", "-n", "-1"}, "--max-records"},
		{[]string{"consume", "t", "--wait", "2m"}, "--wait"},
		{[]string{"consume", "t", "--fetch-max", "20000"}, "--fetch-max"},
		{[]string{"cluster", "extra"}, "unknown command"},
		{[]string{"cluster", "--server", "ftp://x"}, "invalid --server URL"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newTestRoot(srv.URL, &out, &errOut)
			root.SetArgs(append([]string{"--server", srv.URL}, tc.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseServerURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"localhost:8080", "http://localhost:8080", true},
		{"http://h:1/", "http://h:1", true},
		{"https://h/prefix/", "https://h/prefix", true},
		{"http://h:1/?x=1#f", "http://h:1", true},
		{"", "", false},
		{"ftp://h", "", false},
		{"http://", "", false},
	} {
		u, err := parseServerURL(tc.in)
		if (err == nil) != tc.ok {
			t.Fatalf("parseServerURL(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil {
			if !errors.Is(err, errBadServerURL) {
				t.Fatalf("parseServerURL(%q) err = %v, want errBadServerURL", tc.in, err)
			}
			continue
		}
		if u.String() != tc.want {
			t.Fatalf("parseServerURL(%q) = %q, want %q", tc.in, u, tc.want)
		}
	}
}

func TestParseConfigs(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{nil, map[string]string{}, false},
		{[]string{"a=1", "b=x=y,z"}, map[string]string{"a": "1", "b": "x=y,z"}, false},
		{[]string{" a =1"}, map[string]string{"a": "1"}, false},
		{[]string{"a="}, map[string]string{"a": ""}, false},
		{[]string{"a"}, nil, true},
		{[]string{"=1"}, nil, true},
		{[]string{"a=1", "a=2"}, nil, true},
	} {
		got, err := parseConfigs(tc.in)
		if (err != nil) != tc.wantErr {
			t.Fatalf("parseConfigs(%q) err = %v", tc.in, err)
		}
		if err == nil && !jsonEqual(t, got, tc.want) {
			t.Fatalf("parseConfigs(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRequestBodies(t *testing.T) {
	create, err := buildCreateTopic("orders", 3, true, 0, false, []string{"retention.ms=1000"})
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := buildCreateTopic("orders", 1, false, 2, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	alter, err := buildAlterConfigs([]string{"retention.ms=5"}, []string{"cleanup.policy", "cleanup.policy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"create", create, `{"configs":{"retention.ms":"1000"},"name":"orders","partitions":3}`}, // the generated client's field order
		{"create with defaults", defaults, `{"name":"orders","replication_factor":2}`},
		{"alter", alter, `{"configs":{"cleanup.policy":null,"retention.ms":"5"}}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: body %s, want %s", tc.name, b, tc.want)
		}
	}
}

func TestParsePartitionAndOffset(t *testing.T) {
	for _, tc := range []struct {
		in      string
		part    int32
		all, ok bool
	}{
		{"all", 0, true, true}, {"ALL", 0, true, true}, {"0", 0, false, true},
		{"7", 7, false, true}, {"-1", 0, false, false}, {"x", 0, false, false}, {"", 0, false, false},
	} {
		p, all, err := parsePartitionArg(tc.in)
		if (err == nil) != tc.ok || p != tc.part || all != tc.all {
			t.Errorf("parsePartitionArg(%q) = %d, %v, %v", tc.in, p, all, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"earliest", "earliest"}, {"Latest", "latest"}, {"0", "0"}, {"0042", "42"},
		{"-1", ""}, {"first", ""}, {"", ""}, {"99999999999999999999", ""},
	} {
		got, err := parseStartOffset(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("parseStartOffset(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestProblemError(t *testing.T) {
	req := apiRequest{method: http.MethodGet, path: "/v1/topics/x"}
	for _, tc := range []struct {
		name, ctype, body string
		status            int
		want              string
	}{
		{"problem", "application/problem+json",
			`{"type":"urn:runnel:problem:topic-not-found","title":"Topic not found","status":404,"detail":"no topic \"x\""}`,
			404, `Topic not found: no topic "x" (HTTP 404 from GET /v1/topics/x)`},
		{"field", "application/problem+json",
			`{"type":"urn:runnel:problem:invalid","title":"Invalid request","status":400,"field":"partitions"}`,
			400, `Invalid request [field partitions] (HTTP 400 from GET /v1/topics/x)`},
		{"plain text", "text/plain", "upstream\n  down", 502, "Bad Gateway: upstream down (HTTP 502 from GET /v1/topics/x)"},
		{"bad json", "application/problem+json", "{", 500, "Internal Server Error: { (HTTP 500 from GET /v1/topics/x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := decodeProblem(tc.status, tc.ctype, []byte(tc.body), req)
			if p.Error() != tc.want || p.Status != tc.status {
				t.Fatalf("got %q (status %d), want %q", p.Error(), p.Status, tc.want)
			}
		})
	}
}

// TestClientRequest checks what goes on the wire: escaped path under a base
// path, query, JSON body, and a problem document coming back as *problemError.
func TestClientRequest(t *testing.T) {
	var gotURI, gotCT, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotURI, gotCT = r.RequestURI, r.Header.Get("Content-Type")
		b := new(bytes.Buffer)
		b.ReadFrom(r.Body)
		gotBody = b.String()
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		w.Write([]byte(`{"type":"urn:runnel:problem:topic-exists","title":"Topic exists","status":409}`))
	}))
	defer srv.Close()
	c, err := newAPIClient(srv.URL+"/base/", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.do(t.Context(), apiRequest{
		method: http.MethodPost, path: topicPath("a b/c") + "/records",
		query: map[string][]string{"encoding": {"string"}}, body: map[string]int{"x": 1},
	})
	var p *problemError
	if !errors.As(err, &p) || p.Status != http.StatusConflict || p.Title != "Topic exists" {
		t.Fatalf("err = %v, want the 409 problem", err)
	}
	if want := "/base/v1/topics/a%20b%2Fc/records?encoding=string"; gotURI != want {
		t.Errorf("request URI %q, want %q", gotURI, want)
	}
	if gotCT != "application/json" || gotBody != `{"x":1}` {
		t.Errorf("content type %q body %q", gotCT, gotBody)
	}
}

func TestClientUnreachable(t *testing.T) {
	c, err := newAPIClient("127.0.0.1:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.do(t.Context(), apiRequest{method: http.MethodGet, path: "/v1/cluster"})
	if err == nil || !strings.Contains(err.Error(), "GET /v1/cluster") {
		t.Fatalf("err = %v, want a connection error naming the request", err)
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// TestClientRetriesUnavailable: a 503 (the server did nothing) is retried
// until it clears or the budget runs out; other errors are not retried.
func TestClientRetriesUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int
		status    int
		budget    time.Duration
		wantCalls int // exactly; 0: at most maxCalls
		maxCalls  int
		wantErr   bool
	}{
		{"clears", 2, http.StatusServiceUnavailable, 5 * time.Second, 3, 0, false},
		// Pauses of 50 and 100 ms fit the 200 ms budget, the next (200 ms)
		// does not: three calls at most, however slow the machine (the
		// time taken, once asserted, depended on its load).
		{"budget exhausted", 100, http.StatusServiceUnavailable, 200 * time.Millisecond, 0, 3, true},
		{"not retried", 1, http.StatusBadRequest, 5 * time.Second, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				if calls <= tc.failures {
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(tc.status)
					w.Write([]byte(`{"type":"urn:runnel:problem:not-leader","title":"Not the partition leader","status":503}`))
					return
				}
				w.Write([]byte(`{"topics":[]}`))
			}))
			defer srv.Close()
			c, err := newAPIClient(srv.URL, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c.unavailableFor = tc.budget
			_, err = c.do(t.Context(), apiRequest{method: http.MethodGet, path: "/v1/topics"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.maxCalls > 0 && (calls < 1 || calls > tc.maxCalls) {
				t.Fatalf("%d calls within a budget of %v, want 1 to %d", calls, tc.budget, tc.maxCalls)
			}
		})
	}
}
