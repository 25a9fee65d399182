package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
)

// QuotasBackend is optionally implemented by a Backend that keeps Kafka's
// client quotas (in the metadata log, enforced on both doors): GET|PUT
// /v1/quotas. Safe for concurrent use. Errors wrap ErrInvalidRequest for
// a bad entity or value.
type QuotasBackend interface {
	// ListQuotas returns the quotas whose entity has the parts f names
	// (an empty f: every quota).
	ListQuotas(ctx context.Context, f QuotaEntity) ([]Quota, error)
	// SetQuota makes q's values the entity's quota (no values: removes it).
	SetQuota(ctx context.Context, q Quota) (Quota, error)
}

// QuotaEntity is who a quota applies to: a user, a client id, or both;
// each part a name or the default (every user or client id without a
// quota of its own). HTTP requests have no client id: user quotas and the
// default-user quotas apply to them.
type QuotaEntity struct {
	User            string `json:"user,omitempty"`
	DefaultUser     bool   `json:"default_user,omitempty"`
	ClientID        string `json:"client_id,omitempty"`
	DefaultClientID bool   `json:"default_client_id,omitempty"`
}

// Quota is an entity's quota: bytes per second produced and fetched, and
// the percentage of one request-handling thread's time.
type Quota struct {
	Entity            QuotaEntity `json:"entity"`
	ProducerByteRate  *float64    `json:"producer_byte_rate,omitempty"`
	ConsumerByteRate  *float64    `json:"consumer_byte_rate,omitempty"`
	RequestPercentage *float64    `json:"request_percentage,omitempty"`
}

// QuotaList is the body of GET /v1/quotas.
type QuotaList struct {
	Quotas []Quota `json:"quotas"`
}

// ErrQuotaExceeded: the client went over its quota; retry after the
// Retry-After seconds (a *RetryAfterError carries them).
var ErrQuotaExceeded = errors.New("api: client quota exceeded")

// RetryAfterError is an error answered with a Retry-After of After
// (rounded up to whole seconds) instead of the usual 1 s.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

type quotasResource struct{ h *handler }

func (q quotasResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", q.list)
	r.Put("/", q.set)
	return r
}

func (q quotasResource) backend(w http.ResponseWriter, r *http.Request) (QuotasBackend, bool) {
	qb, ok := q.h.b.(QuotasBackend)
	if !ok {
		q.h.problem(w, r, fmt.Errorf("%w: quotas", ErrNotImplemented))
	}
	return qb, ok
}

func (q quotasResource) list(w http.ResponseWriter, r *http.Request) {
	qb, ok := q.backend(w, r)
	if !ok {
		return
	}
	v := r.URL.Query()
	quotas, err := qb.ListQuotas(r.Context(), QuotaEntity{User: v.Get("user"), ClientID: v.Get("client_id"),
		DefaultUser: v.Get("default_user") == "true", DefaultClientID: v.Get("default_client_id") == "true"})
	if err != nil {
		q.h.problem(w, r, err)
		return
	}
	if quotas == nil {
		quotas = []Quota{}
	}
	q.h.writeJSON(w, r, http.StatusOK, QuotaList{Quotas: quotas})
}

func (q quotasResource) set(w http.ResponseWriter, r *http.Request) {
	qb, ok := q.backend(w, r)
	if !ok {
		return
	}
	var body Quota
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

// retryAfter is the Retry-After of a 429: a RetryAfterError's wait in whole
// seconds (at least 1), else 1.
func retryAfter(err error) string {
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After > time.Second {
		return strconv.FormatInt(int64((ra.After+time.Second-1)/time.Second), 10)
	}
	return "1"
}
