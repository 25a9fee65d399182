package rest

import (
	"fmt"
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type sessionResource struct{ h *handler }

func (s sessionResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", s.login)
	r.Get("/", s.info)
	r.Delete("/", s.logout)
	return r
}

func (s sessionResource) backend(w http.ResponseWriter, r *http.Request) (api.SessionBackend, bool) {
	sb, ok := s.h.b.(api.SessionBackend)
	if !ok {
		s.h.problem(w, r, fmt.Errorf("%w: sessions", api.ErrNotImplemented))
	}
	return sb, ok
}

func (s sessionResource) login(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	var req api.LoginRequest
	if err := decodeJSONBody(r, &req); err != nil {
		s.h.problem(w, r, err)
		return
	}
	id, info, err := sb.Login(r.Context(), req)
	if err != nil {
		s.h.problem(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: api.SessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	s.h.writeJSON(w, r, http.StatusOK, info)
}

func (s sessionResource) info(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	info, err := sb.SessionInfo(r.Context(), api.SessionID(r), host, q.Get("resource_type"), q["resource_name"])
	if err != nil {
		s.h.problem(w, r, err)
		return
	}
	s.h.writeJSON(w, r, http.StatusOK, info)
}

func (s sessionResource) logout(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.backend(w, r)
	if !ok {
		return
	}
	if err := sb.Logout(r.Context(), api.SessionID(r)); err != nil {
		s.h.problem(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: api.SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
