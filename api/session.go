package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
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

type sessionResource struct{ h *handler }

func (s sessionResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", s.login)
	r.Get("/", s.info)
	r.Delete("/", s.logout)
	return r
}

func (s sessionResource) backend(w http.ResponseWriter, r *http.Request) (SessionBackend, bool) {
	sb, ok := s.h.b.(SessionBackend)
	if !ok {
		s.h.problem(w, r, fmt.Errorf("%w: sessions", ErrNotImplemented))
	}
	return sb, ok
}

func sessionID(r *http.Request) string {
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value
	}
	return ""
}

func (s sessionResource) login(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	var req LoginRequest
	if err := decodeJSONBody(r, &req); err != nil {
		s.h.problem(w, r, err)
		return
	}
	id, info, err := sb.Login(r.Context(), req)
	if err != nil {
		s.h.problem(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	s.h.writeJSON(w, r, http.StatusOK, info)
}

func (s sessionResource) info(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	info, err := sb.SessionInfo(r.Context(), sessionID(r), host, q.Get("resource_type"), q["resource_name"])
	if err != nil {
		s.h.problem(w, r, err)
		return
	}
	s.h.writeJSON(w, r, http.StatusOK, info)
}

func (s sessionResource) logout(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	if err := sb.Logout(r.Context(), sessionID(r)); err != nil {
		s.h.problem(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// sessionCredentials reads the session cookie as credentials when the
// request has no Authorization header; a write must carry the session's
// CSRF token.
func sessionCredentials(r *http.Request) (Credentials, bool) {
	id := sessionID(r)
	if id == "" || r.Header.Get("Authorization") != "" {
		return Credentials{}, false
	}
	unsafe := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	return Credentials{Scheme: "session", Token: id, CSRF: strings.TrimSpace(r.Header.Get(CSRFHeader)), Write: unsafe}, true
}
