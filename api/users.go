package api

import (
	"context"
	"fmt"
	"strings"
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
