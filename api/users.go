package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
)

// UsersBackend is optionally implemented by a Backend that keeps users
// (SCRAM credentials in the metadata log): GET|POST /v1/users,
// DELETE /v1/users/{name}. Safe for concurrent use. Passwords go in and
// never come out: a User carries only its name and mechanisms.
type UsersBackend interface {
	ListUsers(ctx context.Context) ([]User, error)
	// UpsertUser creates the user or replaces its password for the
	// mechanism. Errors wrap ErrInvalidRequest for a bad name.
	UpsertUser(ctx context.Context, req UserRequest) (User, error)
	// DeleteUser errors wrap ErrUnknownUser when there is none.
	DeleteUser(ctx context.Context, name string) error
}

// User is one user as GET /v1/users lists it.
type User struct {
	Name       string   `json:"name"`
	Mechanisms []string `json:"mechanisms"`
}

// UserList is the body of GET /v1/users.
type UserList struct {
	Users []User `json:"users"`
}

// UserRequest is the body of POST /v1/users.
type UserRequest struct {
	Name      string `json:"name"`
	Password  string `json:"password"`
	Mechanism string `json:"mechanism,omitempty"`
}

// User name and password bounds (also in openapi.yaml).
const (
	MaxUserNameLen = 256
	MaxPasswordLen = 1024
)

// ErrUnknownUser: the user named in the path does not exist.
var ErrUnknownUser = fmt.Errorf("%w: unknown user", ErrNotFound)

// usersResource serves /v1/users.
type usersResource struct{ h *handler }

func (u usersResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", u.list)
	r.Post("/", u.upsert)
	r.Delete("/{name}", u.delete)
	return r
}

func (u usersResource) backend(w http.ResponseWriter, r *http.Request) (UsersBackend, bool) {
	ub, ok := u.h.b.(UsersBackend)
	if !ok {
		u.h.problem(w, r, fmt.Errorf("%w: users", ErrNotImplemented))
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
		users = []User{}
	}
	u.h.writeJSON(w, r, http.StatusOK, UserList{Users: users})
}

const userNameRule = "a user name is 1 to 256 bytes without ',', '=' or control characters"

// ValidUserName: 1 to MaxUserNameLen bytes, no ',' '=' (SCRAM's separators)
// and no control characters.
func ValidUserName(name string) error {
	if name == "" || len(name) > MaxUserNameLen {
		return fmt.Errorf("%w: user name must be 1 to %d bytes", ErrInvalidRequest, MaxUserNameLen)
	}
	if strings.ContainsAny(name, ",=") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("%w: user name may not hold ',', '=' or control characters", ErrInvalidRequest)
	}
	return nil
}

func (u usersResource) upsert(w http.ResponseWriter, r *http.Request) {
	ub, ok := u.backend(w, r)
	if !ok {
		return
	}
	var req UserRequest
	if err := decodeJSONBody(r, &req); err != nil {
		u.h.problem(w, r, err)
		return
	}
	if err := ValidUserName(req.Name); err != nil {
		u.h.problem(w, r, &FieldError{Field: "body.name", Err: err, Msg: userNameRule})
		return
	}
	if req.Password == "" || len(req.Password) > MaxPasswordLen {
		u.h.problem(w, r, &FieldError{Field: "body.password", Err: ErrInvalidRequest, Msg: fmt.Sprintf("password must be 1 to %d bytes", MaxPasswordLen)})
		return
	}
	if req.Mechanism == "" {
		req.Mechanism = "SCRAM-SHA-256"
	}
	if req.Mechanism != "SCRAM-SHA-256" && req.Mechanism != "SCRAM-SHA-512" {
		u.h.problem(w, r, &FieldError{Field: "body.mechanism", Err: ErrInvalidRequest, Msg: "mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"})
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
	if err := ValidUserName(name); err != nil {
		u.h.problem(w, r, &FieldError{Field: "path.name", Err: err, Msg: userNameRule})
		return
	}
	if err := ub.DeleteUser(r.Context(), name); err != nil {
		u.h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
