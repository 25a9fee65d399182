package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// ACLsBackend is optionally implemented by a Backend that keeps ACLs
// (Kafka's model, in the metadata log): GET|POST|DELETE /v1/acls. Safe for
// concurrent use. Errors wrap ErrInvalidRequest for a bad ACL.
type ACLsBackend interface {
	ListACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
	CreateACL(ctx context.Context, a ACL) (ACL, error)
	// DeleteACLs removes the ACLs f selects and returns them.
	DeleteACLs(ctx context.Context, f ACLFilter) ([]ACL, error)
}

// ACL is one access control entry (POST /v1/acls body).
type ACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type,omitempty"` // default literal
	Principal    string `json:"principal"`
	Host         string `json:"host,omitempty"` // default *
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// ACLFilter selects ACLs by the query parameters of GET and DELETE
// /v1/acls (same names as ACL's fields); an empty field matches any.
type ACLFilter ACL

// ACLList is the body of GET and DELETE /v1/acls.
type ACLList struct {
	ACLs []ACL `json:"acls"`
}

type aclsResource struct{ h *handler }

func (a aclsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", a.list)
	r.Post("/", a.create)
	r.Delete("/", a.delete)
	return r
}

func (a aclsResource) backend(w http.ResponseWriter, r *http.Request) (ACLsBackend, bool) {
	ab, ok := a.h.b.(ACLsBackend)
	if !ok {
		a.h.problem(w, r, fmt.Errorf("%w: ACLs", ErrNotImplemented))
	}
	return ab, ok
}

func aclFilter(r *http.Request) ACLFilter {
	q := r.URL.Query()
	return ACLFilter{ResourceType: q.Get("resource_type"), ResourceName: q.Get("resource_name"), PatternType: q.Get("pattern_type"),
		Principal: q.Get("principal"), Host: q.Get("host"), Operation: q.Get("operation"), Permission: q.Get("permission")}
}

func (a aclsResource) writeList(w http.ResponseWriter, r *http.Request, acls []ACL, err error) {
	if err != nil {
		a.h.problem(w, r, err)
		return
	}
	if acls == nil {
		acls = []ACL{}
	}
	a.h.writeJSON(w, r, http.StatusOK, ACLList{ACLs: acls})
}

func (a aclsResource) list(w http.ResponseWriter, r *http.Request) {
	if ab, ok := a.backend(w, r); ok {
		acls, err := ab.ListACLs(r.Context(), aclFilter(r))
		a.writeList(w, r, acls, err)
	}
}

func (a aclsResource) create(w http.ResponseWriter, r *http.Request) {
	ab, ok := a.backend(w, r)
	if !ok {
		return
	}
	var acl ACL
	if err := decodeJSONBody(r, &acl); err != nil {
		a.h.problem(w, r, err)
		return
	}
	if acl.Host == "" {
		acl.Host = "*"
	}
	if acl.PatternType == "" {
		acl.PatternType = "literal"
	}
	created, err := ab.CreateACL(r.Context(), acl)
	if err != nil {
		a.h.problem(w, r, err)
		return
	}
	a.h.writeJSON(w, r, http.StatusCreated, created)
}

func (a aclsResource) delete(w http.ResponseWriter, r *http.Request) {
	ab, ok := a.backend(w, r)
	if !ok {
		return
	}
	f := aclFilter(r)
	if f == (ACLFilter{}) {
		a.h.problem(w, r, &FieldError{Field: "query", Err: ErrInvalidRequest, Msg: "give at least one filter (e.g. principal=User:alice); deleting every ACL needs an explicit filter"})
		return
	}
	acls, err := ab.DeleteACLs(r.Context(), f)
	a.writeList(w, r, acls, err)
}
