package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/auth"
)

// API tokens: "rnl_<id>_<secret>", the secret 32 random bytes; the
// metadata log keeps the SHA-256 of the secret, the principal and the
// expiry (raftfsm.CreateToken). A Bearer token authenticates as its
// principal until it expires or is deleted.

const tokenPrefix = "rnl_"

var errBadToken = errors.New("invalid or expired API token")

func (s *Server) createToken(ctx context.Context, principal string, lifetime time.Duration) (api.NewToken, error) {
	if principal == "" {
		return api.NewToken{}, fmt.Errorf("%w: log in (--auth required) to create a token; it acts as you", api.ErrInvalidRequest)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return api.NewToken{}, err
	}
	enc := base64.RawURLEncoding.EncodeToString(secret)
	now := s.faults.now() // wall time: ExpiresMs is compared on every node
	t := raftfsm.Token{ID: nuid.Next(), Principal: principal, Hash: sha256.Sum256([]byte(enc)),
		CreatedMs: now.UnixMilli(), ExpiresMs: now.Add(lifetime).UnixMilli()}
	if _, err := s.applyMeta(ctx, raftfsm.Command{CreateToken: &raftfsm.CreateToken{Token: t}}); err != nil {
		return api.NewToken{}, toHTTPError(err)
	}
	return api.NewToken{ID: t.ID, Token: tokenPrefix + t.ID + "_" + enc, Principal: principal,
		ExpiresAt: time.UnixMilli(t.ExpiresMs).UTC()}, nil
}

// checkToken returns the principal of a valid, unexpired token.
func (s *Server) checkToken(token string) (string, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return "", errBadToken
	}
	img, _ := s.meta.Image()
	t := img.Tokens[id]
	sum := sha256.Sum256([]byte(secret))
	if t == nil || subtle.ConstantTimeCompare(sum[:], t.Hash[:]) != 1 || s.faults.now().UnixMilli() >= t.ExpiresMs {
		return "", errBadToken
	}
	return t.Principal, nil
}

var _ api.TokensBackend = (*httpBackend)(nil)

func (h *httpBackend) CreateToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	lifetime := api.DefaultTokenLifetime
	if req.ExpiresInSeconds > 0 {
		lifetime = time.Duration(req.ExpiresInSeconds) * time.Second
	}
	return h.s.createToken(ctx, api.PrincipalFrom(ctx), lifetime)
}

// DeleteToken revokes a token of the caller; a principal with alter on
// the cluster (a superuser) may revoke any.
func (h *httpBackend) DeleteToken(ctx context.Context, id string) error {
	img, _ := h.s.meta.Image()
	t := img.Tokens[id]
	if t == nil {
		return fmt.Errorf("%w: %q", api.ErrUnknownToken, id)
	}
	p := api.PrincipalFrom(ctx)
	if p != t.Principal && !h.s.allowed(p, "*", auth.Cluster, auth.ClusterName, auth.Alter) {
		return fmt.Errorf("%w: %s may revoke only its own tokens", api.ErrForbidden, p)
	}
	_, err := h.s.applyMeta(ctx, raftfsm.Command{DeleteToken: &raftfsm.DeleteToken{ID: id}})
	if errors.Is(err, raftfsm.ErrUnknownToken) {
		return &translatedError{kind: api.ErrUnknownToken, err: err}
	}
	return toHTTPError(err)
}
