package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// authDo sends a request with Basic credentials (user "" : none) and
// checks the answer against openapi.yaml.
func authDo(t *testing.T, c *apiClient, method, path, user, pwd string, body any) (*http.Response, []byte) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pwd)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	c.validate(req, raw, resp, out)
	return resp, out
}

func passwordFile(t testing.TB, pwd string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pwd")
	if err := os.WriteFile(f, []byte(pwd+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// With --auth required the HTTP API wants Basic credentials of a stored
// user (401 problem+json with WWW-Authenticate otherwise), except the
// probes and the docs; the CLI logs in with --user/--password-file.
func TestHTTPBasicAuth(t *testing.T) {
	const pwd = "admin-pw-51e0"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, pwd)}})
	c := newAPIClient(t, n)
	for _, p := range []string{"/livez", "/readyz", "/openapi.yaml"} {
		if resp, _ := authDo(t, c, http.MethodGet, p, "", "", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s without credentials: %d", p, resp.StatusCode)
		}
	}
	for _, cred := range [][2]string{{"", ""}, {"admin", "wrong"}, {"nobody", pwd}} {
		resp, body := authDo(t, c, http.MethodGet, "/v1/topics", cred[0], cred[1], nil)
		var p problem
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasSuffix(p.Type, ":unauthenticated") ||
			!strings.Contains(strings.Join(resp.Header.Values("WWW-Authenticate"), ";"), "Basic realm=") {
			t.Fatalf("credentials %q: %d %v %s", cred[0], resp.StatusCode, resp.Header, body)
		}
	}
	if resp, body := authDo(t, c, http.MethodPost, "/v1/topics", "admin", pwd, map[string]any{"name": "basic", "partitions": 1}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create topic as admin: %d %s", resp.StatusCode, body)
	}
	// A user created over the API logs in too.
	authDo(t, c, http.MethodPost, "/v1/users", "admin", pwd, map[string]any{"name": "alice", "password": "alice-pw", "mechanism": "SCRAM-SHA-512"})
	authDo(t, c, http.MethodPost, "/v1/acls", "admin", pwd, map[string]any{"resource_type": "topic", "resource_name": "basic",
		"principal": "User:alice", "operation": "write", "permission": "allow"})
	if resp, body := authDo(t, c, http.MethodPost, "/v1/topics/basic/records", "alice", "alice-pw",
		map[string]any{"records": []map[string]any{{"value": "hi"}}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("produce as alice: %d %s", resp.StatusCode, body)
	}
	// The node remembers passwords it verified (server/access/passwordcache.go): a new
	// password or a deleted user still takes effect on the next request.
	produceAs := func(pw string) int {
		resp, _ := authDo(t, c, http.MethodPost, "/v1/topics/basic/records", "alice", pw, map[string]any{"records": []map[string]any{{"value": "hi"}}})
		return resp.StatusCode
	}
	if resp, body := authDo(t, c, http.MethodPost, "/v1/users", "admin", pwd, map[string]any{"name": "alice", "password": "alice-pw2", "mechanism": "SCRAM-SHA-512"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("new password: %d %s", resp.StatusCode, body)
	}
	if old, cur := produceAs("alice-pw"), produceAs("alice-pw2"); old != http.StatusUnauthorized || cur != http.StatusOK {
		t.Fatalf("after a new password: the old one answers %d, the new one %d", old, cur)
	}
	if resp, body := authDo(t, c, http.MethodDelete, "/v1/users/alice", "admin", pwd, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete alice: %d %s", resp.StatusCode, body)
	}
	if code := produceAs("alice-pw2"); code != http.StatusUnauthorized {
		t.Fatalf("a deleted user's password answers %d", code)
	}

	cli := func(args ...string) (string, error) {
		out, err := exec.Command(servertest.Binary(t), append([]string{"--server", n.URL}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli("topic", "list"); err == nil || !strings.Contains(out, "uthenticat") {
		t.Fatalf("CLI without credentials: %v\n%s", err, out)
	}
	if out, err := cli("--user", "admin", "--password-file", passwordFile(t, pwd), "topic", "list"); err != nil || !strings.Contains(out, "basic") {
		t.Fatalf("CLI as admin: %v\n%s", err, out)
	}
}

// Requests a node forwards to the partition leader (produce) or proxies
// to the group coordinator carry no client credentials: the first node
// authenticated them, the cluster port vouches for it. A client without
// credentials is refused before anything is forwarded.
func TestHTTPBasicAuthForwarded(t *testing.T) {
	const pwd = "admin-pw-cluster"
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: append([]string{"--auth", "required", "--bootstrap-superuser", "admin",
			"--bootstrap-superuser-password-file", passwordFile(t, pwd)}, fastSessions...)})
	ac := newAPIClient(t, c.Node(1))
	if resp, body := authDo(t, ac, http.MethodPost, "/v1/topics", "admin", pwd,
		map[string]any{"name": "fwd", "partitions": 3, "replication_factor": 1}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create topic: %d %s", resp.StatusCode, body)
	}
	for _, n := range c.Nodes {
		nc := newAPIClient(t, n)
		for p := range 3 { // one of the partitions has its leader elsewhere
			body := map[string]any{"records": []map[string]any{{"value": fmt.Sprintf("v%d", p), "partition": p}}}
			if resp, out := authDo(t, nc, http.MethodPost, "/v1/topics/fwd/records", "", "", body); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("anonymous produce via %s: %d %s", n.URL, resp.StatusCode, out)
			}
			if resp, out := authDo(t, nc, http.MethodPost, "/v1/topics/fwd/records", "admin", pwd, body); resp.StatusCode != http.StatusOK {
				t.Fatalf("produce to partition %d via %s: %d %s", p, n.URL, resp.StatusCode, out)
			}
		}
		if resp, out := authDo(t, nc, http.MethodGet, "/v1/groups/g1", "", "", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("anonymous group read via %s: %d %s", n.URL, resp.StatusCode, out)
		}
	}

	// bob may use group "spoof" but read no topic: joining it to read "fwd"
	// is refused where the group lives, also when another node proxies the
	// join there and bob claims to be admin in the forwarding header.
	if resp, out := authDo(t, ac, http.MethodPost, "/v1/users", "admin", pwd, map[string]any{"name": "bob", "password": "bob-pw"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create bob: %d %s", resp.StatusCode, out)
	}
	if resp, out := authDo(t, ac, http.MethodPost, "/v1/acls", "admin", pwd, map[string]any{"resource_type": "group", "resource_name": "spoof",
		"principal": "User:bob", "operation": "read", "permission": "allow"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create ACL: %d %s", resp.StatusCode, out)
	}
	// The group exists (so it has a coordinator the other nodes proxy to).
	servertest.WaitFor(t, 30*time.Second, "admin joins group spoof", func() bool { // 503 until it has a coordinator
		resp, _ := authDo(t, ac, http.MethodPost, "/v1/groups/spoof/members", "admin", pwd, map[string]any{"topics": []string{"fwd"}})
		return resp.StatusCode < 300
	})
	for _, n := range c.Nodes { // metadata reaches the other nodes a moment later
		nc := newAPIClient(t, n)
		servertest.WaitFor(t, 30*time.Second, "bob and his ACL on "+n.URL, func() bool {
			_, users := authDo(t, nc, http.MethodGet, "/v1/users", "admin", pwd, nil)
			_, acls := authDo(t, nc, http.MethodGet, "/v1/acls?principal=User:bob", "admin", pwd, nil)
			return strings.Contains(string(users), `"bob"`) && strings.Contains(string(acls), "spoof")
		})
	}
	for _, n := range c.Nodes {
		req, _ := http.NewRequest(http.MethodPost, n.URL+"/v1/groups/spoof/members", strings.NewReader(`{"topics":["fwd"]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Runnel-Principal", "User:admin")
		req.SetBasicAuth("bob", "bob-pw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(out), `read topic \"fwd\"`) {
			t.Fatalf("bob joins to read fwd via %s: %d %s", n.URL, resp.StatusCode, out)
		}
	}
}

// Over HTTPS with a client CA, a verified client certificate is the
// principal User:<CN> (here a --super-users entry); another principal
// with no ACL is refused with 403 naming itself.
func TestHTTPSClientCertPrincipal(t *testing.T) {
	certs := makeCerts(t, "3")
	n, base := startTLSNode(t, certs, "--auth", "required", "--tls-client-ca-file", filepath.Join(certs, "ca.pem"),
		"--super-users", "User:runnel-node-2")
	_ = n
	roots := caPool(t, certs)
	get := func(id string) (int, string) {
		resp, err := httpsClient(roots, keyPair(t, certs, id)).Get(base + "/v1/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("2"); code != http.StatusOK {
		t.Fatalf("superuser certificate: %d %s", code, body)
	}
	if code, body := get("3"); code != http.StatusForbidden || !strings.Contains(body, "User:runnel-node-3") {
		t.Fatalf("certificate without ACL: %d %s", code, body)
	}
}
