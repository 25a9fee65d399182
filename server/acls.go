package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/auth"
)

// ACLs live in the metadata log (raftfsm.CreateACLs/DeleteACLs); the
// decision is auth.Authorizer's, built when the ACLs change and asked by
// both doors (httpAuthorizer, kafkaBackend.Authorize). Under --auth none
// nothing is authorized: every client may do everything.

// authzCache is the authorizer of the last image it was asked for.
type authzCache struct {
	cur atomic.Pointer[authzEntry]
}

type authzEntry struct {
	img  *raftfsm.Image
	acls map[string]raftfsm.ACLEntry // the ACLs a was built from
	a    *auth.Authorizer
}

func toAuthACL(e raftfsm.ACLEntry) auth.ACL {
	return auth.ACL{ResourceType: e.ResourceType, ResourceName: e.ResourceName, PatternType: e.PatternType,
		Principal: e.Principal, Host: e.Host, Operation: e.Operation, Permission: e.Permission}
}

func toEntry(a auth.ACL) raftfsm.ACLEntry {
	return raftfsm.ACLEntry{ResourceType: a.ResourceType, ResourceName: a.ResourceName, PatternType: a.PatternType,
		Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.Permission}
}

// authorizer returns the authorizer of the current metadata. Every
// metadata command publishes a new image (a partition's leader or ISR
// changes, a producer id block, a topic): the index is rebuilt only when
// the image's ACLs differ from those it was built from, a comparison that
// costs what the FSM's copy of them into the new image already cost.
func (s *Server) authorizer() *auth.Authorizer {
	img, _ := s.meta.Image()
	e := s.authz.cur.Load()
	if e != nil && e.img == img {
		return e.a
	}
	if e != nil && sameACLs(e.acls, img.ACLs) {
		s.authz.cur.Store(&authzEntry{img: img, acls: img.ACLs, a: e.a})
		return e.a
	}
	superUsers := append([]string(nil), s.cfg.Auth.SuperUsers...)
	if u := s.cfg.Auth.BootstrapSuperuser; u != "" {
		superUsers = append(superUsers, "User:"+u)
	}
	acls := make([]auth.ACL, 0, len(img.ACLs))
	for _, e := range img.ACLs {
		acls = append(acls, toAuthACL(e))
	}
	a := auth.New(superUsers, acls)
	s.authz.cur.Store(&authzEntry{img: img, acls: img.ACLs, a: a})
	return a
}

// sameACLs: a and b hold the same entries (the key is every field).
func sameACLs(a, b map[string]raftfsm.ACLEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return false
		}
	}
	return true
}

// allowed is the one authorization check of both doors.
func (s *Server) allowed(principal, host, resourceType, name, op string) bool {
	if s.cfg.Auth.Mode != AuthRequired {
		return true
	}
	return s.authorizer().Allowed(auth.Request{Principal: principal, Host: host, ResourceType: resourceType, ResourceName: name, Operation: op})
}

func (s *Server) listACLs(f auth.Filter) []auth.ACL {
	img, _ := s.meta.Image()
	var out []auth.ACL
	for _, e := range img.ACLs {
		if a := toAuthACL(e); f.Matches(a) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return toEntry(out[i]).Key() < toEntry(out[j]).Key() })
	return out
}

func (s *Server) createACLs(ctx context.Context, acls []auth.ACL) error {
	entries := make([]raftfsm.ACLEntry, len(acls))
	for i, a := range acls {
		if err := a.Check(); err != nil {
			return err
		}
		entries[i] = toEntry(a)
	}
	_, err := s.applyMeta(ctx, raftfsm.Command{CreateACLs: &raftfsm.CreateACLs{ACLs: entries}})
	return err
}

// deleteACLs removes the ACLs f selects now and returns them.
func (s *Server) deleteACLs(ctx context.Context, f auth.Filter) ([]auth.ACL, error) {
	acls := s.listACLs(f)
	if len(acls) == 0 {
		return nil, nil
	}
	if len(acls) > raftfsm.MaxACLsPerCommand {
		return nil, fmt.Errorf("%w: the filter selects %d ACLs, at most %d go at once", auth.ErrInvalidACL, len(acls), raftfsm.MaxACLsPerCommand)
	}
	entries := make([]raftfsm.ACLEntry, len(acls))
	for i, a := range acls {
		entries[i] = toEntry(a)
	}
	_, err := s.applyMeta(ctx, raftfsm.Command{DeleteACLs: &raftfsm.DeleteACLs{ACLs: entries}})
	return acls, err
}

var _ api.ACLsBackend = (*httpBackend)(nil)

func (h *httpBackend) ListACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	return toAPIACLs(h.s.listACLs(auth.Filter(f))), nil
}

func (h *httpBackend) CreateACL(ctx context.Context, a api.ACL) (api.ACL, error) {
	return a, aclHTTPError(h.s.createACLs(ctx, []auth.ACL{auth.ACL(a)}))
}

func (h *httpBackend) DeleteACLs(ctx context.Context, f api.ACLFilter) ([]api.ACL, error) {
	acls, err := h.s.deleteACLs(ctx, auth.Filter(f))
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

// httpAuthorizer is the HTTP door's view of the authorizer.
type httpAuthorizer struct{ s *Server }

func (a httpAuthorizer) Allowed(_ context.Context, principal, host string, p api.Permission) bool {
	return a.s.allowed(principal, host, p.ResourceType, p.ResourceName, p.Operation)
}

var _ kafkaproto.KafkaAuthorizer = (*kafkaBackend)(nil)

func (k *kafkaBackend) Authorize(principal, host, resourceType, name, op string) bool {
	return k.s.allowed(principal, host, resourceType, name, op)
}

var _ kafkaproto.ACLAdmin = (*kafkaBackend)(nil)

func (k *kafkaBackend) CreateACLs(ctx context.Context, acls []kafkaproto.ACL) error {
	as := make([]auth.ACL, len(acls))
	for i, a := range acls {
		as[i] = auth.ACL(a)
	}
	err := k.s.createACLs(ctx, as)
	if errors.Is(err, auth.ErrInvalidACL) {
		return fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafkaError(err)
}

func (k *kafkaBackend) DescribeACLs(_ context.Context, f kafkaproto.ACL) ([]kafkaproto.ACL, error) {
	return toKafkaACLs(k.s.listACLs(auth.Filter(f))), nil
}

func (k *kafkaBackend) DeleteACLs(ctx context.Context, f kafkaproto.ACL) ([]kafkaproto.ACL, error) {
	acls, err := k.s.deleteACLs(ctx, auth.Filter(f))
	if errors.Is(err, auth.ErrInvalidACL) {
		return nil, fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafkaACLs(acls), toKafkaError(err)
}

func toKafkaACLs(acls []auth.ACL) []kafkaproto.ACL {
	out := make([]kafkaproto.ACL, len(acls))
	for i, a := range acls {
		out[i] = kafkaproto.ACL(a)
	}
	return out
}
