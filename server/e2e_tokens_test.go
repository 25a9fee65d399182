package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// bearerDo sends a request with a bearer token and checks the answer
// against openapi.yaml.
func bearerDo(t *testing.T, c *apiClient, method, path, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	c.validate(req, nil, resp, out)
	return resp.StatusCode, out
}

// A token made by alice (HTTP and CLI) authenticates as alice, with her
// ACLs, until it is revoked; only its hash is stored, so it is not in the
// node's data directory; a made-up or revoked token is refused.
func TestAPITokens(t *testing.T) {
	const admin = "admin-pw-tok"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin)}})
	c := newAPIClient(t, n)
	authDo(t, c, http.MethodPost, "/v1/users", "admin", admin, api.UserRequest{Name: "alice", Password: "alice-pw"})
	authDo(t, c, http.MethodPost, "/v1/topics", "admin", admin, map[string]any{"name": "tok", "partitions": 1})
	authDo(t, c, http.MethodPost, "/v1/acls", "admin", admin, api.ACL{ResourceType: "topic", ResourceName: "tok",
		Principal: "User:alice", Operation: "read", Permission: "allow"})

	resp, body := authDo(t, c, http.MethodPost, "/v1/tokens", "alice", "alice-pw", api.TokenRequest{ExpiresInSeconds: 3600})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create token: %d %s", resp.StatusCode, body)
	}
	var tok api.NewToken
	if err := json.Unmarshal(body, &tok); err != nil || tok.Principal != "User:alice" || tok.Token == "" {
		t.Fatalf("token %s", body)
	}
	if code, out := bearerDo(t, c, http.MethodGet, "/v1/topics/tok/partitions/0/records", tok.Token); code != http.StatusOK {
		t.Fatalf("read with the token: %d %s", code, out)
	}
	if code, out := bearerDo(t, c, http.MethodDelete, "/v1/topics/tok", tok.Token); code != http.StatusForbidden {
		t.Fatalf("the token may do more than alice: %d %s", code, out)
	}
	for _, bad := range []string{"rnl_" + tok.ID + "_forged", "nonsense", tok.Token + "x"} {
		if code, out := bearerDo(t, c, http.MethodGet, "/v1/topics", bad); code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d %s", bad, code, out)
		}
	}
	// The CLI: create with --user, use with RUNNEL_TOKEN.
	cmd := exec.Command(servertest.Binary(t), "--server", n.URL, "--user", "alice", "--password-file", passwordFile(t, "alice-pw"), "token", "create", "--expires-in", "1h")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runnel token create: %v", err)
	}
	cliTok := strings.TrimSpace(string(out))
	use := exec.Command(servertest.Binary(t), "--server", n.URL, "topic", "list")
	use.Env = append(os.Environ(), "RUNNEL_TOKEN="+cliTok)
	if out, err := use.CombinedOutput(); err != nil || !strings.Contains(string(out), "tok") {
		t.Fatalf("runnel topic list with RUNNEL_TOKEN: %v\n%s", err, out)
	}
	// Revoked: refused.
	if code, out := bearerDo(t, c, http.MethodDelete, "/v1/tokens/"+tok.ID, tok.Token); code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", code, out)
	}
	if code, _ := bearerDo(t, c, http.MethodGet, "/v1/topics", tok.Token); code != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d", code)
	}
	n.Stop()
	_, secret, _ := strings.Cut(strings.TrimPrefix(cliTok, "rnl_"), "_")
	var found bool
	_ = walkFiles(n.DataDir, func(b []byte) { found = found || strings.Contains(string(b), secret) })
	if found {
		t.Fatal("a token is stored in the data directory")
	}
}

// walkFiles calls fn with the content of every regular file under dir.
func walkFiles(dir string, fn func([]byte)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			_ = walkFiles(p, fn)
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			fn(b)
		}
	}
	return nil
}
