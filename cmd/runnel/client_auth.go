package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Client credentials: --user with --password-file (HTTP Basic, the same
// users Kafka SASL logs in), or --token (an API token, Bearer). Passwords
// and tokens are never flags' values: those show in ps.

func (g *globalFlags) registerAuth(fs *pflag.FlagSet) {
	fs.StringVar(&g.User, "user", os.Getenv("RUNNEL_USER"), "user name to log in as (HTTP Basic; env RUNNEL_USER); the password comes from --password-file or RUNNEL_PASSWORD")
	fs.StringVar(&g.PasswordFile, "password-file", os.Getenv("RUNNEL_PASSWORD_FILE"), "file holding --user's password (surrounding whitespace trimmed; env RUNNEL_PASSWORD_FILE)")
	fs.StringVar(&g.Token, "token", os.Getenv("RUNNEL_TOKEN"), "API token (Authorization: Bearer; prefer env RUNNEL_TOKEN)")
}

// authorizer returns what adds the credentials to a request; nil when
// none are given.
func (g *globalFlags) authorizer() (func(*http.Request), error) {
	switch {
	case g.Token != "" && g.User != "":
		return nil, errors.New("--token and --user: give one, not both")
	case g.Token != "":
		token := g.Token
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, nil
	case g.User == "":
		if g.PasswordFile != "" {
			return nil, errors.New("--password-file needs --user")
		}
		return nil, nil
	}
	pwd, err := g.password()
	if err != nil {
		return nil, err
	}
	user := g.User
	return func(r *http.Request) { r.SetBasicAuth(user, pwd) }, nil
}

func (g *globalFlags) password() (string, error) {
	if g.PasswordFile == "" {
		if pwd := os.Getenv("RUNNEL_PASSWORD"); pwd != "" {
			return pwd, nil
		}
		return "", errors.New("--user needs --password-file (or RUNNEL_PASSWORD)")
	}
	raw, err := os.ReadFile(g.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	pwd := strings.TrimSpace(string(raw))
	if pwd == "" {
		return "", fmt.Errorf("--password-file: %s is empty", g.PasswordFile)
	}
	return pwd, nil
}
