package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/runnel/runnel/server"
)

// authFlags are the authentication flags of `runnel serve` (issue 15).
type authFlags struct {
	mode, superUsers       string
	allowAnonymous         bool
	bootstrapUser, pwdFile string
	maxReauth              time.Duration
}

// bootstrapPasswordEnv holds the bootstrap superuser's password when no
// file is given (a flag would show in ps).
const bootstrapPasswordEnv = "RUNNEL_BOOTSTRAP_SUPERUSER_PASSWORD"

func (a *authFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.mode, "auth", server.AuthNone, "client authentication: none (every client may do everything) or required (Kafka SASL, HTTP Basic)")
	fs.BoolVar(&a.allowAnonymous, "allow-anonymous", false, "accept clients without credentials on listeners other machines can reach")
	fs.StringVar(&a.bootstrapUser, "bootstrap-superuser", "", "user created (SCRAM-SHA-256 and -512) on first start when it does not exist yet; a superuser")
	fs.StringVar(&a.pwdFile, "bootstrap-superuser-password-file", "", "file holding the bootstrap superuser's password (surrounding whitespace trimmed); or set "+bootstrapPasswordEnv)
	fs.DurationVar(&a.maxReauth, "connections-max-reauth", 0, "Kafka SASL logins last this long, then the client re-authenticates on its connection (connections.max.reauth.ms, KIP-368); 0: as long as the connection")
	fs.StringVar(&a.superUsers, "super-users", "", "principals that bypass authorization, as User:a,User:b")
}

func (a *authFlags) apply(cfg *server.Config) error {
	cfg.Auth = server.AuthConfig{
		Mode:               a.mode,
		AllowAnonymous:     a.allowAnonymous,
		BootstrapSuperuser: a.bootstrapUser,
		SuperUsers:         server.ParseSuperUsers(a.superUsers),
		MaxReauth:          a.maxReauth,
	}
	if a.maxReauth < 0 {
		return fmt.Errorf("--connections-max-reauth: %v is negative", a.maxReauth)
	}
	if a.bootstrapUser == "" {
		return nil
	}
	if a.pwdFile == "" {
		cfg.Auth.BootstrapSuperuserPassword = os.Getenv(bootstrapPasswordEnv)
		return nil
	}
	raw, err := os.ReadFile(a.pwdFile)
	if err != nil {
		return fmt.Errorf("--bootstrap-superuser-password-file: %w", err)
	}
	if cfg.Auth.BootstrapSuperuserPassword = strings.TrimSpace(string(raw)); cfg.Auth.BootstrapSuperuserPassword == "" {
		return fmt.Errorf("--bootstrap-superuser-password-file: %s is empty", a.pwdFile)
	}
	return nil
}
