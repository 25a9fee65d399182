package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// Browser sessions for the web UI (issue 15): POST /v1/session logs in with
// a user's name and password or an API token and sets an HttpOnly,
// SameSite=Strict cookie; the answer carries a CSRF token the page sends
// back in the X-CSRF-Token header on every write (a request authenticated
// by the cookie alone and changing something is refused 403
// csrf-token-invalid). GET /v1/session names the caller and, with
// resource_type and resource_name (repeatable), lists the operations the
// caller may perform on each resource, so the UI shows only those actions.

// SessionCookie is the UI session cookie's name.
const SessionCookie = "runnel_session"

// CSRFHeader carries a session's CSRF token on writes.
const CSRFHeader = "X-CSRF-Token"

// ErrCSRF: a write authenticated by the session cookie without its CSRF
// token; 403.
var ErrCSRF = errors.New("api: missing or wrong CSRF token")

// LoginRequest is the body of POST /v1/session: user and password, or token.
type LoginRequest struct {
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// SessionInfo is the answer of POST and GET /v1/session.
type SessionInfo struct {
	Principal    string `json:"principal"`
	AuthRequired bool   `json:"auth_required"`
	CSRFToken    string `json:"csrf_token,omitempty"`
	// Permissions: resource name -> the operations the caller may
	// perform on it (GET with resource_type and resource_name).
	Permissions map[string][]string `json:"permissions,omitempty"`
}

// SessionBackend is optionally implemented by a Backend with UI sessions.
// Safe for concurrent use.
type SessionBackend interface {
	// Login checks the credentials and opens a session: its id (the
	// cookie's value) and what GET /v1/session answers. Errors wrap
	// ErrUnauthenticated.
	Login(ctx context.Context, req LoginRequest) (id string, info SessionInfo, err error)
	// SessionInfo describes the request's principal; sessionID is the
	// cookie's value ("" without one). resourceType and names ask for
	// the principal's operations on those resources.
	SessionInfo(ctx context.Context, sessionID, host, resourceType string, names []string) (SessionInfo, error)
	// Logout ends the session (nothing when there is none).
	Logout(ctx context.Context, sessionID string) error
}

// SessionID is the value of the request's session cookie ("" for none).
func SessionID(r *http.Request) string {
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value
	}
	return ""
}

// sessionCredentials reads the session cookie as credentials when the
// request has no Authorization header; a write must carry the session's
// CSRF token.
func sessionCredentials(r *http.Request) (Credentials, bool) {
	id := SessionID(r)
	if id == "" || r.Header.Get("Authorization") != "" {
		return Credentials{}, false
	}
	unsafe := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	return Credentials{Scheme: "session", Token: id, CSRF: strings.TrimSpace(r.Header.Get(CSRFHeader)), Write: unsafe}, true
}
