package server

import (
	"errors"
	"fmt"
	"strings"
	"time"
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
	ctx, stop := s.startContext()
	defer stop()
	return startError(ctx, s.access.BootstrapSuperuser(ctx))
}
