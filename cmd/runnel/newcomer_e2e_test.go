package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// What a new user tries in their first hour, against a real node.

// `runnel version` and GET /v1/cluster name the same build.
func TestCLIVersionMatchesCluster(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}

	var local struct{ Version, Commit, GoVersion string }
	local.GoVersion = ""
	var raw map[string]any
	if err := json.Unmarshal([]byte(c.ok(nil, "version", "-o", "json")), &raw); err != nil {
		t.Fatal(err)
	}
	local.Version, _ = raw["version"].(string)
	local.Commit, _ = raw["commit"].(string)
	local.GoVersion, _ = raw["go_version"].(string)
	if local.Version == "" || local.Commit == "" || !strings.HasPrefix(local.GoVersion, "go") {
		t.Fatalf("runnel version -o json: %v", raw)
	}
	if human := c.ok(nil, "version"); !strings.Contains(human, local.Version) || !strings.Contains(human, local.Commit) {
		t.Fatalf("runnel version printed %q, want %s and %s", human, local.Version, local.Commit)
	}
	if v := c.ok(nil, "--version"); !strings.Contains(v, local.Version) {
		t.Fatalf("runnel --version printed %q, want %s", v, local.Version)
	}

	resp, err := http.Get(node.URL + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cl struct {
		Node struct {
			Build struct {
				Version   string `json:"version"`
				Commit    string `json:"commit"`
				GoVersion string `json:"go_version"`
			} `json:"build"`
		} `json:"node"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cl); err != nil {
		t.Fatal(err)
	}
	if b := cl.Node.Build; b.Version != local.Version || b.Commit != local.Commit || b.GoVersion != local.GoVersion {
		t.Fatalf("/v1/cluster build %+v, runnel version %+v", b, local)
	}
	if local.Commit == "unknown" {
		t.Logf("binary built without VCS information (not a git checkout?)")
	}
}

// Text in, text out: lines produced with the defaults come back as the same
// text with the defaults, not base64.
func TestCLITextRoundTrip(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}
	c.ok(nil, "topic", "create", "lines", "-p", "1")
	in := "line-1\nline 2 ünïcode\n{\"json\":true}\n42\n"
	c.ok(strings.NewReader(in), "produce", "lines")

	if out := c.ok(nil, "consume", "lines", "--values"); out != in {
		t.Fatalf("consume --values printed %q, want %q", out, in)
	}
	recs := c.ok(nil, "consume", "lines")
	var got []string
	for line := range strings.Lines(recs) {
		var r struct {
			Value         json.RawMessage `json:"value"`
			ValueEncoding string          `json:"value_encoding"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume line %q: %v", line, err)
		}
		got = append(got, r.ValueEncoding+" "+string(r.Value))
	}
	want := []string{`string "line-1"`, `string "line 2 ünïcode"`, `json {"json":true}`, `json 42`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("consume printed values\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A missing partition is an error, with no "Consumed 0 records." before it.
	_, errOut, err := c.run(nil, "consume", "lines", "-p", "9")
	if err == nil || strings.Contains(errOut, "Consumed") || !strings.Contains(errOut, "404") {
		t.Fatalf("consume -p 9: err %v, stderr %q; want only the 404", err, errOut)
	}
}

// Error messages a user reads name no internal Go package.
func TestCLIErrorsNameNoPackage(t *testing.T) {
	node := servertest.Start(t, servertest.Options{})
	c := cli{t: t, bin: servertest.Binary(t), server: node.URL}
	c.ok(nil, "topic", "create", "dup")
	var msgs []string
	for _, args := range [][]string{{"topic", "create", "dup"}, {"topic", "describe", "missing"}, {"consume", "dup", "-p", "5"}} {
		_, errOut, err := c.run(nil, args...)
		if err == nil {
			t.Fatalf("runnel %v succeeded", args)
		}
		msgs = append(msgs, errOut)
	}
	resp, err := http.Post(node.URL+"/v1/topics", "application/json", strings.NewReader(`{"name":"x","partitions":"three"}`))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Detail string }
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	msgs = append(msgs, p.Detail)
	for _, m := range msgs {
		for _, pkg := range []string{"api: ", "raftfsm: ", "segments: ", "kafkaproto: ", "server: "} {
			if strings.Contains(m, pkg) {
				t.Errorf("message names package %q: %s", strings.TrimSuffix(pkg, ": "), m)
			}
		}
	}
}
