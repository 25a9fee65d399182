package rest

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type aclsResource struct{ h *handler }

func (a aclsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", a.list)
	r.Post("/", a.create)
	r.Delete("/", a.delete)
	return r
}

func (a aclsResource) backend(w http.ResponseWriter, r *http.Request) (api.ACLsBackend, bool) {
	ab, ok := a.h.b.(api.ACLsBackend)
	if !ok {
		a.h.problem(w, r, fmt.Errorf("%w: ACLs", api.ErrNotImplemented))
	}
	return ab, ok
}

func aclFilter(r *http.Request) api.ACLFilter {
	q := r.URL.Query()
	return api.ACLFilter{ResourceType: q.Get("resource_type"), ResourceName: q.Get("resource_name"), PatternType: q.Get("pattern_type"),
		Principal: q.Get("principal"), Host: q.Get("host"), Operation: q.Get("operation"), Permission: q.Get("permission")}
}

func (a aclsResource) writeList(w http.ResponseWriter, r *http.Request, acls []api.ACL, err error) {
	if err != nil {
		a.h.problem(w, r, err)
		return
	}
	if acls == nil {
		acls = []api.ACL{}
	}
	a.h.writeJSON(w, r, http.StatusOK, api.ACLList{ACLs: acls})
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
	var acl api.ACL
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
	if f == (api.ACLFilter{}) {
		a.h.problem(w, r, &api.FieldError{Field: "query", Err: api.ErrInvalidRequest, Msg: "give at least one filter (e.g. principal=User:alice); deleting every ACL needs an explicit filter"})
		return
	}
	acls, err := ab.DeleteACLs(r.Context(), f)
	a.writeList(w, r, acls, err)
}
