package api

import (
	"context"
	"fmt"
	"time"
)

// TokensBackend is optionally implemented by a Backend that issues API
// tokens: POST /v1/tokens, DELETE /v1/tokens/{id}. A token acts as the
// principal that created it until it expires; only its hash is kept, so
// it is shown once. Safe for concurrent use.
type TokensBackend interface {
	// CreateToken issues a token for the request's principal. Errors wrap
	// ErrInvalidRequest when there is no principal (--auth none).
	CreateToken(ctx context.Context, req TokenRequest) (NewToken, error)
	// DeleteToken revokes a token of the request's principal (a
	// superuser: any). Errors wrap ErrUnknownToken, ErrForbidden.
	DeleteToken(ctx context.Context, id string) error
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Description string `json:"description,omitempty"`
	// ExpiresInSeconds is the token's lifetime: 1 s to MaxTokenLifetime,
	// default DefaultTokenLifetime.
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
}

// NewToken is the answer of POST /v1/tokens: the only time the token is shown.
type NewToken struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Principal string    `json:"principal"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Token lifetimes.
const (
	DefaultTokenLifetime = 30 * 24 * time.Hour
	MaxTokenLifetime     = 366 * 24 * time.Hour
)

// ErrUnknownToken: the token named in the path does not exist.
var ErrUnknownToken = fmt.Errorf("%w: unknown token", ErrNotFound)
