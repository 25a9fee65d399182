package rest

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

// usersResource serves /v1/users.
type usersResource struct{ h *handler }

func (u usersResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", u.list)
	r.Post("/", u.upsert)
	r.Delete("/{name}", u.delete)
	return r
}

func (u usersResource) backend(w http.ResponseWriter, r *http.Request) (api.UsersBackend, bool) {
	ub, ok := u.h.b.(api.UsersBackend)
	if !ok {
		u.h.problem(w, r, fmt.Errorf("%w: users", api.ErrNotImplemented))
	}
	return ub, ok
}

func (u usersResource) list(w http.ResponseWriter, r *http.Request) {
	ub, ok := u.backend(w, r)
	if !ok {
		return
	}
	users, err := ub.ListUsers(r.Context())
	if err != nil {
		u.h.problem(w, r, err)
		return
	}
	if users == nil {
		users = []api.User{}
	}
	u.h.writeJSON(w, r, http.StatusOK, api.UserList{Users: users})
}

const userNameRule = "a user name is 1 to 256 bytes without ',', '=' or control characters"

func (u usersResource) upsert(w http.ResponseWriter, r *http.Request) {
	ub, ok := u.backend(w, r)
	if !ok {
		return
	}
	var req api.UserRequest
	if err := decodeJSONBody(r, &req); err != nil {
		u.h.problem(w, r, err)
		return
	}
	if err := api.ValidUserName(req.Name); err != nil {
		u.h.problem(w, r, &api.FieldError{Field: "body.name", Err: err, Msg: userNameRule})
		return
	}
	if req.Password == "" || len(req.Password) > api.MaxPasswordLen {
		u.h.problem(w, r, &api.FieldError{Field: "body.password", Err: api.ErrInvalidRequest, Msg: fmt.Sprintf("password must be 1 to %d bytes", api.MaxPasswordLen)})
		return
	}
	if req.Mechanism == "" {
		req.Mechanism = "SCRAM-SHA-256"
	}
	if req.Mechanism != "SCRAM-SHA-256" && req.Mechanism != "SCRAM-SHA-512" {
		u.h.problem(w, r, &api.FieldError{Field: "body.mechanism", Err: api.ErrInvalidRequest, Msg: "mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"})
		return
	}
	user, err := ub.UpsertUser(r.Context(), req)
	if err != nil {
		u.h.problem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/users/"+url.PathEscape(user.Name))
	u.h.writeJSON(w, r, http.StatusCreated, user)
}

func (u usersResource) delete(w http.ResponseWriter, r *http.Request) {
	ub, ok := u.backend(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "name")
	if un, err := url.PathUnescape(name); err == nil {
		name = un
	}
	if err := api.ValidUserName(name); err != nil {
		u.h.problem(w, r, &api.FieldError{Field: "path.name", Err: err, Msg: userNameRule})
		return
	}
	if err := ub.DeleteUser(r.Context(), name); err != nil {
		u.h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
