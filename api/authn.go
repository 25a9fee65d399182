package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// HTTP authentication (--auth required): Authorization: Basic (a user's
// name and password, the same users Kafka SASL logs in) or Bearer (an API
// token); without either, a verified TLS client certificate (mTLS) is the
// principal User:<certificate CN>. Authenticate is exported middleware the server puts in front of
// everything but the health and documentation paths, so a request is
// authenticated before any node forwards or proxies it.

// ErrUnauthenticated: credentials missing or wrong; 401 with
// WWW-Authenticate.
var ErrUnauthenticated = errors.New("api: authentication required")

// Credentials is what a request's Authorization header holds.
type Credentials struct {
	Scheme   string // "basic" or "bearer"
	User     string // basic
	Password string // basic
	Token    string // bearer; session: the session cookie's value
	CSRF     string // session: the X-CSRF-Token header
	Write    bool   // session: the request changes something (CSRF token needed)
}

// Authenticator checks credentials. Safe for concurrent use.
type Authenticator interface {
	// CheckCredentials returns the principal the credentials prove
	// ("User:alice"), or an error wrapping ErrUnauthenticated.
	CheckCredentials(ctx context.Context, c Credentials) (principal string, err error)
}

type principalKey struct{}

// PrincipalHeader carries the principal of a request one node forwards to
// another over the authenticated cluster port; Authenticate reads it only
// from trusted requests, and a forwarding node must overwrite whatever the
// client sent.
const PrincipalHeader = "X-Runnel-Principal"

// PrincipalFrom returns the authenticated principal of a request ("" for
// anonymous requests, as under --auth none).
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// authExempt are the paths anyone may read: probes, the API's own
// documentation, and the web UI's static files (they hold no data; the UI
// logs in with POST /v1/session and every call it makes is authenticated).
func authExempt(path string) bool {
	switch path {
	case "/livez", "/readyz", "/openapi.yaml", "/docs", "/ui", "/":
		return true
	}
	return strings.HasPrefix(path, "/ui/")
}

// Authenticate refuses requests without valid credentials (401
// problem+json with WWW-Authenticate) and puts the principal in the
// request context. trusted, when non-nil, exempts requests another node
// already authenticated (forwarded over the authenticated cluster port).
func Authenticate(a Authenticator, trusted func(*http.Request) bool, logger *slog.Logger) func(http.Handler) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if authExempt(r.URL.Path) || (r.URL.Path == "/v1/session" && r.Method == http.MethodPost) {
				// POST /v1/session is the login itself.
				next.ServeHTTP(w, r)
				return
			}
			if trusted != nil && trusted(r) {
				// The forwarding node authenticated the client and names it.
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, r.Header.Get(PrincipalHeader))))
				return
			}
			p, err := checkRequest(r, a)
			if err != nil {
				logger.LogAttrs(r.Context(), slog.LevelDebug, "refused a request without valid credentials",
					slogString("path", r.URL.Path), slogString("remote", r.RemoteAddr))
				if r.Header.Get("X-Runnel-UI") == "" { // a challenge would pop the browser's login dialog over the UI's
					w.Header().Add("WWW-Authenticate", `Basic realm="runnel", charset="UTF-8"`)
					w.Header().Add("WWW-Authenticate", `Bearer realm="runnel"`)
				}
				WriteProblem(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		})
	}
}

func checkRequest(r *http.Request, a Authenticator) (string, error) {
	if r.Header.Get("Authorization") == "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		// A client certificate the node's client CA verified (mTLS), as on
		// the Kafka SSL listener.
		if cn := r.TLS.VerifiedChains[0][0].Subject.CommonName; cn != "" {
			return "User:" + cn, nil
		}
	}
	if c, ok := sessionCredentials(r); ok {
		return a.CheckCredentials(r.Context(), c)
	}
	c, err := parseAuthorization(r)
	if err != nil {
		return "", err
	}
	return a.CheckCredentials(r.Context(), c)
}

// parseAuthorization reads the Authorization header.
func parseAuthorization(r *http.Request) (Credentials, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Credentials{}, fmt.Errorf("%w: no credentials (use Authorization: Basic or Bearer)", ErrUnauthenticated)
	}
	if user, pwd, ok := r.BasicAuth(); ok {
		return Credentials{Scheme: "basic", User: user, Password: pwd}, nil
	}
	scheme, token, _ := strings.Cut(h, " ")
	if strings.EqualFold(scheme, "bearer") && strings.TrimSpace(token) != "" {
		return Credentials{Scheme: "bearer", Token: strings.TrimSpace(token)}, nil
	}
	return Credentials{}, fmt.Errorf("%w: unsupported Authorization header (use Basic or Bearer)", ErrUnauthenticated)
}
