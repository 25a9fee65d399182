package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
)

// API tokens: "rnl_<id>_<secret>", the secret 32 random bytes; the
// metadata log keeps the SHA-256 of the secret, the principal and the
// expiry (raftfsm.CreateToken). A Bearer token authenticates as its
// principal until it expires or is deleted.

const tokenPrefix = "rnl_"

// ErrBadToken: the token is malformed, unknown, deleted or expired.
var ErrBadToken = errors.New("invalid or expired API token")

// CreateToken makes a token acting as principal (not empty) for lifetime
// and proposes it; the error is the proposal's.
func (a *Access) CreateToken(ctx context.Context, principal string, lifetime time.Duration) (api.NewToken, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return api.NewToken{}, err
	}
	enc := base64.RawURLEncoding.EncodeToString(secret)
	now := a.cfg.Now() // wall time: ExpiresMs is compared on every node
	t := raftfsm.Token{ID: nuid.Next(), Principal: principal, Hash: sha256.Sum256([]byte(enc)),
		CreatedMs: now.UnixMilli(), ExpiresMs: now.Add(lifetime).UnixMilli()}
	if err := a.cfg.Meta.Apply(ctx, raftfsm.Command{CreateToken: &raftfsm.CreateToken{Token: t}}); err != nil {
		return api.NewToken{}, err
	}
	return api.NewToken{ID: t.ID, Token: tokenPrefix + t.ID + "_" + enc, Principal: principal,
		ExpiresAt: time.UnixMilli(t.ExpiresMs).UTC()}, nil
}

// CheckToken returns the principal of a valid, unexpired token.
func (a *Access) CheckToken(token string) (string, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return "", ErrBadToken
	}
	t := a.cfg.Meta.Image().Tokens[id]
	sum := sha256.Sum256([]byte(secret))
	if t == nil || subtle.ConstantTimeCompare(sum[:], t.Hash[:]) != 1 || a.cfg.Now().UnixMilli() >= t.ExpiresMs {
		return "", ErrBadToken
	}
	return t.Principal, nil
}

// DeleteToken proposes revoking token id (raftfsm.ErrUnknownToken).
func (a *Access) DeleteToken(ctx context.Context, id string) error {
	return a.cfg.Meta.Apply(ctx, raftfsm.Command{DeleteToken: &raftfsm.DeleteToken{ID: id}})
}
