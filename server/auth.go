package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
)

// Authentication modes (--auth).
const (
	AuthNone     = "none"     // every client is anonymous and may do everything (the default)
	AuthRequired = "required" // clients authenticate (Kafka SASL, HTTP Basic)
)

// AuthConfig is the authentication part of Config.
type AuthConfig struct {
	Mode           string // AuthNone ("" too) or AuthRequired
	AllowAnonymous bool   // --allow-anonymous
	// BootstrapSuperuser is created (SCRAM-SHA-256 and -512) with
	// BootstrapSuperuserPassword when the metadata has no user of that name.
	BootstrapSuperuser         string
	BootstrapSuperuserPassword string
	// SuperUsers are principals ("User:name") that bypass authorization.
	SuperUsers []string
	// MaxReauth is Kafka's connections.max.reauth.ms: how long a Kafka SASL
	// login lasts before the client must re-authenticate on its connection
	// (KIP-368); 0 (the default, as Kafka): as long as the connection.
	MaxReauth time.Duration // --connections-max-reauth
}

// check validates the flags together.
func (a AuthConfig) check() error {
	switch a.Mode {
	case "", AuthNone, AuthRequired:
	default:
		return fmt.Errorf("--auth: %q is not none or required", a.Mode)
	}
	if a.BootstrapSuperuser != "" && a.BootstrapSuperuserPassword == "" {
		return errors.New("--bootstrap-superuser needs --bootstrap-superuser-password-file or RUNNEL_BOOTSTRAP_SUPERUSER_PASSWORD")
	}
	for _, p := range a.SuperUsers {
		if !strings.HasPrefix(p, "User:") || len(p) == len("User:") {
			return fmt.Errorf("--super-users: %q is not User:<name>", p)
		}
	}
	return nil
}

// ParseSuperUsers splits --super-users (User:a,User:b; Kafka also accepts ';').
func ParseSuperUsers(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// startAuth runs once the node is ready to apply metadata: the bootstrap
// superuser.
func (s *Server) startAuth() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return s.bootstrapSuperuser(ctx)
}

// httpAuthenticator checks HTTP credentials against the stored users and
// API tokens (api.Authenticate).
type httpAuthenticator struct{ s *Server }

func (a httpAuthenticator) CheckCredentials(ctx context.Context, c api.Credentials) (string, error) {
	switch c.Scheme {
	case "basic":
		if c.User != "" && a.s.checkPassword(c.User, c.Password) {
			return "User:" + c.User, nil
		}
		return "", fmt.Errorf("%w: wrong user name or password", api.ErrUnauthenticated)
	case "session":
		return a.s.checkSession(c)
	case "bearer":
		p, err := a.s.checkToken(c.Token)
		if err != nil {
			return "", fmt.Errorf("%w: %v", api.ErrUnauthenticated, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: unsupported scheme", api.ErrUnauthenticated)
}

// withAuth puts HTTP authentication in front of h under --auth required;
// requests another node forwarded were authenticated there. The audit log
// (audit.go) sits between authentication and authorization.
func (s *Server) withAuth(h http.Handler) http.Handler {
	if s.cfg.Auth.Mode != AuthRequired {
		return s.withAudit(h)
	}
	trusted := func(r *http.Request) bool { return isForwarded(r.Context()) }
	h = api.Authorize(httpAuthorizer{s}, trusted)(h)
	h = s.withAudit(h) // after authentication (it names the principal), before authorization (refusals are logged)
	return api.Authenticate(httpAuthenticator{s}, trusted, s.logger.With("component", "http"))(h)
}
