package server

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

// The security surface (ACLs and the one authorizer, users, API tokens, UI
// sessions, the HTTP audit log) is package server/access; this file is
// what the server adds around it: its view of the metadata, and the HTTP
// door's adapter with the translation of its errors (the Kafka door's is
// kafkadoor/access.go).

// newAccess builds the node's security surface.
func (s *Server) newAccess() *access.Access {
	a := s.cfg.Auth
	return access.New(access.Config{Meta: accessMeta{s}, Required: a.Mode == AuthRequired,
		SuperUsers: a.SuperUsers, BootstrapSuperuser: a.BootstrapSuperuser, BootstrapSuperuserPassword: a.BootstrapSuperuserPassword,
		Now: s.faults.now, Logger: s.logger})
}

// accessMeta is access.Metadata: the node's image, proposals with a
// bounded wait that return once this node shows them, and catching up
// with the active controller.
type accessMeta struct{ s *Server }

func (m accessMeta) Image() *raftfsm.Image { img, _ := m.s.meta.Image(); return img }

func (m accessMeta) Apply(ctx context.Context, cmd raftfsm.Command) error {
	_, err := m.s.admin.Apply(ctx, cmd)
	return err
}

func (m accessMeta) CatchUp(ctx context.Context) error { return m.s.admin.CatchUp(ctx) }

// allowed is the one authorization check of both doors.
func (s *Server) allowed(principal, host, resourceType, name, op string) bool {
	return s.access.Allowed(principal, host, resourceType, name, op)
}

// withAuth puts HTTP authentication in front of h under --auth required;
// requests another node forwarded were authenticated there. The audit log
// (server/access/audit.go) sits between authentication and authorization.
func (s *Server) withAuth(h http.Handler) http.Handler {
	forwarded := func(r *http.Request) bool { return isForwarded(r.Context()) }
	if s.cfg.Auth.Mode != AuthRequired {
		return s.access.WithAudit(h, forwarded)
	}
	h = api.Authorize(httpAuthorizer{s}, forwarded)(h)
	h = s.access.WithAudit(h, forwarded) // after authentication (it names the principal), before authorization (refusals are logged)
	return api.Authenticate(s.access, forwarded, s.logger.With("component", "http"))(h)
}

// httpAuthorizer is the HTTP door's view of the authorizer.
type httpAuthorizer struct{ s *Server }

func (a httpAuthorizer) Allowed(_ context.Context, principal, host string, p api.Permission) bool {
	return a.s.allowed(principal, host, p.ResourceType, p.ResourceName, p.Operation)
}

// ACLs, HTTP door.

var _ api.ACLsBackend = (*httpBackend)(nil)

func (h *httpBackend) ListACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	return toAPIACLs(h.s.access.ListACLs(auth.Filter(f))), nil
}

func (h *httpBackend) CreateACL(ctx context.Context, a api.ACL) (api.ACL, error) {
	return a, aclHTTPError(h.s.access.CreateACLs(ctx, []auth.ACL{auth.ACL(a)}))
}

func (h *httpBackend) DeleteACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	acls, err := h.s.access.DeleteACLs(ctx, auth.Filter(f))
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

var _ api.UsersBackend = (*httpBackend)(nil)

func (h *httpBackend) ListUsers(ctx context.Context) ([]api.User, error) {
	img, _ := h.s.meta.Image()
	out := make([]api.User, 0, len(img.Users))
	for _, u := range img.Users {
		out = append(out, api.User{Name: u.Name, Mechanisms: access.UserMechanisms(u)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h *httpBackend) UpsertUser(ctx context.Context, req api.UserRequest) (api.User, error) {
	if err := h.s.access.UpsertUser(ctx, req.Name, req.Password, req.Mechanism); err != nil {
		return api.User{}, userHTTPError(err)
	}
	img, _ := h.s.meta.Image()
	u := img.Users[req.Name]
	if u == nil { // deleted again at once by another request
		return api.User{Name: req.Name, Mechanisms: []string{req.Mechanism}}, nil
	}
	return api.User{Name: u.Name, Mechanisms: access.UserMechanisms(u)}, nil
}

func (h *httpBackend) DeleteUser(ctx context.Context, name string) error {
	return userHTTPError(h.s.access.DeleteUser(ctx, name))
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

var _ api.TokensBackend = (*httpBackend)(nil)

func (h *httpBackend) CreateToken(ctx context.Context, req api.TokenRequest) (api.NewToken, error) {
	lifetime := api.DefaultTokenLifetime
	if req.ExpiresInSeconds > 0 {
		lifetime = time.Duration(req.ExpiresInSeconds) * time.Second
	}
	principal := api.PrincipalFrom(ctx)
	if principal == "" {
		return api.NewToken{}, fmt.Errorf("%w: log in (--auth required) to create a token; it acts as you", api.ErrInvalidRequest)
	}
	t, err := h.s.access.CreateToken(ctx, principal, lifetime)
	if err != nil {
		return api.NewToken{}, toHTTPError(err)
	}
	return t, nil
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
	err := h.s.access.DeleteToken(ctx, id)
	if errors.Is(err, raftfsm.ErrUnknownToken) {
		return &translatedError{kind: api.ErrUnknownToken, err: err}
	}
	return toHTTPError(err)
}

// UI sessions, HTTP door.

var _ api.SessionBackend = (*httpBackend)(nil)

func (h *httpBackend) Login(ctx context.Context, req api.LoginRequest) (string, api.SessionInfo, error) {
	if h.s.cfg.Auth.Mode != AuthRequired {
		return "", api.SessionInfo{}, &translatedError{kind: api.ErrInvalidRequest, err: fmt.Errorf("this node runs with --auth none: no login needed")}
	}
	c := api.Credentials{Scheme: "basic", User: req.User, Password: req.Password}
	if req.Token != "" {
		c = api.Credentials{Scheme: "bearer", Token: req.Token}
	}
	principal, err := h.s.access.CheckCredentials(ctx, c)
	if err != nil {
		return "", api.SessionInfo{}, err
	}
	id, csrf := h.s.access.OpenSession(principal)
	return id, api.SessionInfo{Principal: principal, AuthRequired: true, CSRFToken: csrf}, nil
}

// uiOperations are the operations GET /v1/session reports per resource.
var uiOperations = []string{"read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs"}

func (h *httpBackend) SessionInfo(ctx context.Context, sessionID, host, resourceType string, names []string) (api.SessionInfo, error) {
	info := api.SessionInfo{Principal: api.PrincipalFrom(ctx), AuthRequired: h.s.cfg.Auth.Mode == AuthRequired}
	if principal, csrf, ok := h.s.access.Session(sessionID); ok && principal == info.Principal {
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
				if h.s.allowed(info.Principal, host, resourceType, n, op) {
					ops = append(ops, op)
				}
			}
			info.Permissions[n] = ops
		}
	}
	return info, nil
}

func (h *httpBackend) Logout(_ context.Context, sessionID string) error {
	h.s.access.CloseSession(sessionID)
	return nil
}
