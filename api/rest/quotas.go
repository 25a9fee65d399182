package rest

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

type quotasResource struct{ h *handler }

func (q quotasResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", q.list)
	r.Put("/", q.set)
	return r
}

func (q quotasResource) backend(w http.ResponseWriter, r *http.Request) (api.QuotasBackend, bool) {
	qb, ok := q.h.b.(api.QuotasBackend)
	if !ok {
		q.h.problem(w, r, fmt.Errorf("%w: quotas", api.ErrNotImplemented))
	}
	return qb, ok
}

func (q quotasResource) list(w http.ResponseWriter, r *http.Request) {
	qb, ok := q.backend(w, r)
	if !ok {
		return
	}
	v := r.URL.Query()
	quotas, err := qb.ListQuotas(r.Context(), api.QuotaEntity{User: v.Get("user"), ClientID: v.Get("client_id"),
		DefaultUser: v.Get("default_user") == "true", DefaultClientID: v.Get("default_client_id") == "true"})
	if err != nil {
		q.h.problem(w, r, err)
		return
	}
	if quotas == nil {
		quotas = []api.Quota{}
	}
	q.h.writeJSON(w, r, http.StatusOK, api.QuotaList{Quotas: quotas})
}

func (q quotasResource) set(w http.ResponseWriter, r *http.Request) {
	qb, ok := q.backend(w, r)
	if !ok {
		return
	}
	var body api.Quota
	if err := decodeJSONBody(r, &body); err != nil {
		q.h.problem(w, r, err)
		return
	}
	out, err := qb.SetQuota(r.Context(), body)
	if err != nil {
		q.h.problem(w, r, err)
		return
	}
	q.h.writeJSON(w, r, http.StatusOK, out)
}
