package server_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// Users live in the metadata log: the bootstrap superuser is created on
// first start (and kept, not reset, on restart), users are added, listed
// and deleted over HTTP and the CLI, and no password reaches the log.
func TestUsersHTTPAndCLI(t *testing.T) {
	const adminPwd, alicePwd = "bootstrap-pw-7f3a", "alice-pw-91c2"
	n := servertest.Start(t, servertest.Options{
		Args: []string{"--bootstrap-superuser", "admin"},
		Env:  []string{"RUNNEL_BOOTSTRAP_SUPERUSER_PASSWORD=" + adminPwd},
	})
	c := newAPIClient(t, n)
	var list api.UserList
	c.json(http.MethodGet, "/v1/users", nil, http.StatusOK, &list)
	if len(list.Users) != 1 || list.Users[0].Name != "admin" || strings.Join(list.Users[0].Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("users after bootstrap: %+v", list)
	}

	var u api.User
	c.json(http.MethodPost, "/v1/users", api.UserRequest{Name: "alice", Password: alicePwd, Mechanism: "SCRAM-SHA-512"}, http.StatusCreated, &u)
	if u.Name != "alice" || strings.Join(u.Mechanisms, ",") != "SCRAM-SHA-512" {
		t.Fatalf("created %+v", u)
	}
	c.json(http.MethodPost, "/v1/users", api.UserRequest{Name: "alice", Password: alicePwd}, http.StatusCreated, &u)
	if strings.Join(u.Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("second mechanism: %+v", u)
	}
	c.problem(http.MethodPost, "/v1/users", "application/json", []byte(`{"name":"bob","password":"x","mechanism":"SCRAM-SHA-1"}`), http.StatusBadRequest, "invalid-request")
	c.problem(http.MethodPost, "/v1/users", "application/json", []byte(`{"name":"a,b","password":"x"}`), http.StatusBadRequest, "invalid-request")
	c.problem(http.MethodPost, "/v1/users", "application/json", []byte(`{"name":"bob","password":""}`), http.StatusBadRequest, "invalid-request")

	// The CLI: create from stdin, list, delete.
	cli := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(servertest.Binary(t), append([]string{"--server", n.URL}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("runnel %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cli("carol-pw\n", "user", "create", "carol", "--mechanism", "SCRAM-SHA-512")
	if out := cli("", "user", "list"); !strings.Contains(out, "carol") || !strings.Contains(out, "alice") {
		t.Fatalf("user list:\n%s", out)
	}
	cli("", "user", "delete", "carol")
	c.json(http.MethodDelete, "/v1/users/alice", nil, http.StatusNoContent, nil)
	c.problem(http.MethodDelete, "/v1/users/alice", "", nil, http.StatusNotFound, "not-found")
	c.json(http.MethodGet, "/v1/users", nil, http.StatusOK, &list)
	if len(list.Users) != 1 {
		t.Fatalf("users after deletes: %+v", list)
	}

	// A restart keeps the users and does not recreate the superuser.
	n.Stop()
	n.Start()
	c.json(http.MethodGet, "/v1/users", nil, http.StatusOK, &list)
	if len(list.Users) != 1 || list.Users[0].Name != "admin" {
		t.Fatalf("users after restart: %+v", list)
	}
	logs := n.Logs()
	if got := strings.Count(logs, "bootstrap superuser created"); got != 1 {
		t.Fatalf("bootstrap superuser created %d times:\n%s", got, logs)
	}
	for _, pwd := range []string{adminPwd, alicePwd, "carol-pw"} {
		if strings.Contains(logs, pwd) {
			t.Fatalf("a password is in the log:\n%s", logs)
		}
	}
}
