package httpdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/access"
	"github.com/runnel/runnel/server/auth"
)

// The security surface (server/access) as the HTTP door serves it: the
// authentication, audit and authorization middleware, ACLs, users, API
// tokens and UI sessions, and the translation of its errors.

// WithAuth puts HTTP authentication in front of h under --auth required;
// requests another node forwarded were authenticated there. The audit log
// (server/access/audit.go) sits between authentication and authorization.
func (h *Door) WithAuth(next http.Handler) http.Handler {
	forwarded := func(r *http.Request) bool { return IsForwarded(r.Context()) }
	if !h.cfg.Access.Required() {
		return h.cfg.Access.WithAudit(next, forwarded)
	}
	next = api.Authorize(httpAuthorizer{h}, forwarded)(next)
	next = h.cfg.Access.WithAudit(next, forwarded) // after authentication (it names the principal), before authorization (refusals are logged)
	return api.Authenticate(h.cfg.Access, forwarded, h.cfg.Logger.With("component", "http"))(next)
}

// httpAuthorizer is the HTTP door's view of the authorizer.
type httpAuthorizer struct{ d *Door }

func (a httpAuthorizer) Allowed(_ context.Context, principal, host string, p api.Permission) bool {
	return a.d.allowed(principal, host, p.ResourceType, p.ResourceName, p.Operation)
}

// ACLs, HTTP door.

var _ api.ACLsBackend = (*Door)(nil)

func (h *Door) ListACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	return toAPIACLs(h.cfg.Access.ListACLs(auth.Filter(f))), nil
}

func (h *Door) CreateACL(ctx context.Context, a api.ACL) (api.ACL, error) {
	return a, aclHTTPError(h.cfg.Access.CreateACLs(ctx, []auth.ACL{auth.ACL(a)}))
}

func (h *Door) DeleteACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	acls, err := h.cfg.Access.DeleteACLs(ctx, auth.Filter(f))
	return toAPIACLs(acls), aclHTTPError(err)
}

func toAPIACLs(acls []auth.ACL) []api.ACL {
	out := make([]api.ACL, len(acls))
	for i, a := range acls {
		out[i] = api.ACL(a)
	}
	return out
}

// aclHTTPError adds the ACL errors to httpErrors.
func aclHTTPError(err error) error {
	if errors.Is(err, auth.ErrInvalidACL) {
		return &translatedError{kind: api.ErrInvalidRequest, err: err}
	}
	return toHTTPError(err)
}

// Users, HTTP door.

var _ api.UsersBackend = (*Door)(nil)

func (h *Door) ListUsers(ctx context.Context) ([]api.User, error) {
	img, _ := h.cfg.Meta.Image()
	out := make([]api.User, 0, len(img.Users))
	for _, u := range img.Users {
		out = append(out, api.User{Name: u.Name, Mechanisms: access.UserMechanisms(u)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h *Door) UpsertUser(ctx context.Context, req api.UserRequest) (api.User, error) {
	if err := h.cfg.Access.UpsertUser(ctx, req.Name, req.Password, req.Mechanism); err != nil {
		return api.User{}, userHTTPError(err)
	}
	img, _ := h.cfg.Meta.Image()
	u := img.Users[req.Name]
	if u == nil { // deleted again at once by another request
		return api.User{Name: req.Name, Mechanisms: []string{req.Mechanism}}, nil
	}
	return api.User{Name: u.Name, Mechanisms: access.UserMechanisms(u)}, nil
}

func (h *Door) DeleteUser(ctx context.Context, name string) error {
	return userHTTPError(h.cfg.Access.DeleteUser(ctx, name))
}

// userHTTPError adds the user errors to httpErrors.
func userHTTPError(err error) error {
	switch {
	case errors.Is(err, raftfsm.ErrUnknownUser):
		return &translatedError{kind: api.ErrUnknownUser, err: err}
	case errors.Is(err, access.ErrInvalidCredential), errors.Is(err, access.ErrUnknownMechanism):
		return &translatedError{kind: api.ErrInvalidRequest, err: err}
	}
	return toHTTPError(err)
}

// API tokens, HTTP door.

var _ api.TokensBackend = (*Door)(nil)

func (h *Door) CreateToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	lifetime := api.DefaultTokenLifetime
	if req.ExpiresInSeconds > 0 {
		lifetime = time.Duration(req.ExpiresInSeconds) * time.Second
	}
	principal := api.PrincipalFrom(ctx)
	if principal == "" {
		return api.NewToken{}, fmt.Errorf("%w: log in (--auth required) to create a token; it acts as you", api.ErrInvalidRequest)
	}
	t, err := h.cfg.Access.CreateToken(ctx, principal, lifetime)
	if err != nil {
		return api.NewToken{}, toHTTPError(err)
	}
	return t, nil
}

// DeleteToken revokes a token of the caller; a principal with alter on
// the cluster (a superuser) may revoke any.
func (h *Door) DeleteToken(ctx context.Context, id string) error {
	img, _ := h.cfg.Meta.Image()
	t := img.Tokens[id]
	if t == nil {
		return fmt.Errorf("%w: %q", api.ErrUnknownToken, id)
	}
	p := api.PrincipalFrom(ctx)
	if p != t.Principal && !h.allowed(p, "*", auth.Cluster, auth.ClusterName, auth.Alter) {
		return fmt.Errorf("%w: %s may revoke only its own tokens", api.ErrForbidden, p)
	}
	err := h.cfg.Access.DeleteToken(ctx, id)
	if errors.Is(err, raftfsm.ErrUnknownToken) {
		return &translatedError{kind: api.ErrUnknownToken, err: err}
	}
	return toHTTPError(err)
}

// UI sessions, HTTP door.

var _ api.SessionBackend = (*Door)(nil)

func (h *Door) Login(ctx context.Context, req api.LoginRequest) (string, api.SessionInfo, error) {
	if !h.cfg.Access.Required() {
		return "", api.SessionInfo{}, &translatedError{kind: api.ErrInvalidRequest, err: fmt.Errorf("this node runs with --auth none: no login needed")}
	}
	c := api.Credentials{Scheme: "basic", User: req.User, Password: req.Password}
	if req.Token != "" {
		c = api.Credentials{Scheme: "bearer", Token: req.Token}
	}
	principal, err := h.cfg.Access.CheckCredentials(ctx, c)
	if err != nil {
		return "", api.SessionInfo{}, err
	}
	id, csrf := h.cfg.Access.OpenSession(principal)
	return id, api.SessionInfo{Principal: principal, AuthRequired: true, CSRFToken: csrf}, nil
}

// uiOperations are the operations GET /v1/session reports per resource.
var uiOperations = []string{"read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs"}

func (h *Door) SessionInfo(ctx context.Context, sessionID, host, resourceType string, names []string) (api.SessionInfo, error) {
	info := api.SessionInfo{Principal: api.PrincipalFrom(ctx), AuthRequired: h.cfg.Access.Required()}
	if principal, csrf, ok := h.cfg.Access.Session(sessionID); ok && principal == info.Principal {
		info.CSRFToken = csrf
	}
	if resourceType != "" {
		if len(names) > 100 {
			return info, &translatedError{kind: api.ErrInvalidRequest, err: fmt.Errorf("at most 100 resource_name values")}
		}
		info.Permissions = map[string][]string{}
		for _, n := range names {
			ops := []string{}
			for _, op := range uiOperations {
				if h.allowed(info.Principal, host, resourceType, n, op) {
					ops = append(ops, op)
				}
			}
			info.Permissions[n] = ops
		}
	}
	return info, nil
}

func (h *Door) Logout(_ context.Context, sessionID string) error {
	h.cfg.Access.CloseSession(sessionID)
	return nil
}
