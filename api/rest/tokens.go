package rest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type tokensResource struct{ h *handler }

func (t tokensResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", t.create)
	r.Delete("/{id}", t.delete)
	return r
}

func (t tokensResource) backend(w http.ResponseWriter, r *http.Request) (api.TokensBackend, bool) {
	tb, ok := t.h.b.(api.TokensBackend)
	if !ok {
		t.h.problem(w, r, fmt.Errorf("%w: API tokens", api.ErrNotImplemented))
	}
	return tb, ok
}

func (t tokensResource) create(w http.ResponseWriter, r *http.Request) {
	tb, ok := t.backend(w, r)
	if !ok {
		return
	}
	var req api.TokenRequest
	if r.ContentLength != 0 {
		if err := decodeJSONBody(r, &req); err != nil {
			t.h.problem(w, r, err)
			return
		}
	}
	if req.ExpiresInSeconds < 0 || time.Duration(req.ExpiresInSeconds)*time.Second > api.MaxTokenLifetime {
		t.h.problem(w, r, &api.FieldError{Field: "body.expires_in_seconds", Err: api.ErrInvalidRequest, Msg: fmt.Sprintf("at most %d seconds", int64(api.MaxTokenLifetime/time.Second))})
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
