package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
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

type tokensResource struct{ h *handler }

func (t tokensResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", t.create)
	r.Delete("/{id}", t.delete)
	return r
}

func (t tokensResource) backend(w http.ResponseWriter, r *http.Request) (TokensBackend, bool) {
	tb, ok := t.h.b.(TokensBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: API tokens", ErrNotImplemented))
	}
	return tb, ok
}

func (t tokensResource) create(w http.ResponseWriter, r *http.Request) {
	tb, ok := t.backend(w, r)
	if !ok {
		return
	}
	var req TokenRequest
	if r.ContentLength != 0 {
		if err := decodeJSONBody(r, &req); err != nil {
			t.h.problem(w, r, err)
			return
		}
	}
	if req.ExpiresInSeconds < 0 || time.Duration(req.ExpiresInSeconds)*time.Second > MaxTokenLifetime {
		t.h.problem(w, r, &FieldError{Field: "body.expires_in_seconds", Err: ErrInvalidRequest, Msg: fmt.Sprintf("at most %d seconds", int64(MaxTokenLifetime/time.Second))})
		return
	}
	tok, err := tb.CreateToken(r.Context(), req)
	if err != nil {
		t.h.problem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	t.h.writeJSON(w, r, http.StatusCreated, tok)
}

func (t tokensResource) delete(w http.ResponseWriter, r *http.Request) {
	tb, ok := t.backend(w, r)
	if !ok {
		return
	}
	if err := tb.DeleteToken(r.Context(), chi.URLParam(r, "id")); err != nil {
		t.h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
