package api

import (
	"context"
	"errors"
	"time"
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
