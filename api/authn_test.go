package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

type fakeAuth struct{}

func (fakeAuth) CheckCredentials(_ context.Context, c Credentials) (string, error) {
	if c.Scheme == "basic" && c.User == "alice" && c.Password == "pw" {
		return "User:alice", nil
	}
	if c.Scheme == "bearer" && c.Token == "tok" {
		return "User:bot", nil
	}
	return "", fmt.Errorf("%w: no", ErrUnauthenticated)
}

func TestAuthenticate(t *testing.T) {
	var seen string
	h := Authenticate(fakeAuth{}, func(r *http.Request) bool { return r.Header.Get("X-Trusted") != "" }, nil)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = PrincipalFrom(r.Context()) }))
	for _, tc := range []struct {
		path, auth, trusted string
		status              int
		principal           string
	}{
		{"/v1/topics", "", "", 401, ""},
		{"/v1/topics", "Basic YWxpY2U6cHc=", "", 200, "User:alice"}, // alice:pw
		{"/v1/topics", "Basic YWxpY2U6eA==", "", 401, ""},           // alice:x
		{"/v1/topics", "Bearer tok", "", 200, "User:bot"},
		{"/v1/topics", "Bearer ", "", 401, ""},
		{"/v1/topics", "Digest x", "", 401, ""},
		{"/v1/topics", "", "1", 200, ""},
		{"/livez", "", "", 200, ""},
		{"/openapi.yaml", "", "", 200, ""},
	} {
		seen = "unset"
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		if tc.trusted != "" {
			r.Header.Set("X-Trusted", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Fatalf("%+v: status %d", tc, w.Code)
		}
		if tc.status == 401 {
			if w.Header().Get("WWW-Authenticate") == "" || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%+v: headers %v", tc, w.Header())
			}
			continue
		}
		if tc.path == "/v1/topics" && seen != tc.principal {
			t.Fatalf("%+v: principal %q", tc, seen)
		}
	}
}
