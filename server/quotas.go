package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/quota"
)

// Client quotas (issue 15): stored in the metadata log
// (raftfsm.SetQuotas), resolved and metered by package quota (quota.Node),
// enforced on both doors. Kafka: kafkadoor/quotas.go. HTTP (this file):
// withQuotas answers a client over its quota a delay of up to a second,
// or 429 quota-exceeded with Retry-After, before serving it, and charges
// what a served request cost. A client is the principal's user name
// (ANONYMOUS without authentication) and, on Kafka, its client id. Each
// node meters its own clients, as each Kafka broker does.

// HTTP door.

var _ api.QuotasBackend = (*httpBackend)(nil)

func (h *httpBackend) ListQuotas(_ context.Context, f api.QuotaEntity) ([]api.Quota, error) {
	qs := h.s.quotas.List(func(e quota.Entity) bool {
		return (f.User == "" || e.User == f.User) && (f.ClientID == "" || e.ClientID == f.ClientID) &&
			(!f.DefaultUser || e.UserDefault) && (!f.DefaultClientID || e.ClientIDDefault)
	})
	out := make([]api.Quota, len(qs))
	for i, q := range qs {
		out[i] = toAPIQuota(q.Entity, q.Values)
	}
	return out, nil
}

func (h *httpBackend) SetQuota(ctx context.Context, q api.Quota) (api.Quota, error) {
	e := quota.Entity{User: q.Entity.User, UserDefault: q.Entity.DefaultUser, ClientID: q.Entity.ClientID, ClientIDDefault: q.Entity.DefaultClientID}
	set := map[string]float64{}
	for k, v := range map[string]*float64{quota.ProducerByteRate: q.ProducerByteRate, quota.ConsumerByteRate: q.ConsumerByteRate, quota.RequestPercentage: q.RequestPercentage} {
		if v != nil {
			set[k] = *v
		}
	}
	vals, err := h.s.quotas.Alter(ctx, e, set, nil, true, false)
	if errors.Is(err, quota.ErrInvalid) {
		return api.Quota{}, &translatedError{kind: api.ErrInvalidRequest, err: err}
	}
	if err != nil {
		return api.Quota{}, toHTTPError(err)
	}
	return toAPIQuota(e, vals), nil
}

func toAPIQuota(e quota.Entity, vals map[string]float64) api.Quota {
	q := api.Quota{Entity: api.QuotaEntity{User: e.User, DefaultUser: e.UserDefault, ClientID: e.ClientID, DefaultClientID: e.ClientIDDefault}}
	get := func(k string) *float64 {
		if v, ok := vals[k]; ok {
			return &v
		}
		return nil
	}
	q.ProducerByteRate, q.ConsumerByteRate, q.RequestPercentage = get(quota.ProducerByteRate), get(quota.ConsumerByteRate), get(quota.RequestPercentage)
	return q
}

// httpQuotaKind is the byte quota an HTTP request counts against: the
// produce endpoint's body, the consume endpoints' responses.
func httpQuotaKind(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/topics/") && strings.HasSuffix(p, "/records"):
		return quota.ProducerByteRate
	case r.Method == http.MethodGet && (strings.HasSuffix(p, "/records") || strings.HasSuffix(p, "/records/stream")):
		return quota.ConsumerByteRate
	}
	return ""
}

// maxHTTPQuotaDelay: a request throttled for up to this long is held
// (before its body is read) and then served, so a client sending one
// request after another gets its quota exactly; a longer throttle is
// answered 429 with Retry-After.
const maxHTTPQuotaDelay = time.Second

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// withQuotas enforces client quotas on HTTP requests (after
// authentication: the principal is known). A request forwarded by another
// node was metered there.
func (s *Server) withQuotas(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := s.quotas.Table()
		if t.Empty() || isForwarded(r.Context()) {
			h.ServeHTTP(w, r)
			return
		}
		user, kind := quota.User(api.PrincipalFrom(r.Context())), httpQuotaKind(r)
		kinds := []string{quota.RequestPercentage}
		if kind != "" {
			kinds = append(kinds, kind)
		}
		if d := s.quotas.Throttled(t, user, "", kinds...); d > maxHTTPQuotaDelay {
			api.WriteProblem(w, r, &api.RetryAfterError{After: d,
				Err: fmt.Errorf("%w: %s is over its %s quota for %v more", api.ErrQuotaExceeded, user, strings.Join(kinds, "/"), d.Round(time.Millisecond))})
			return
		} else if d > 0 && !sleepCtx(r.Context(), d) {
			return // the client left
		}
		start := time.Now()
		var body *countingBody
		if r.Body != nil && kind == quota.ProducerByteRate {
			body = &countingBody{ReadCloser: r.Body}
			r.Body = body
		}
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		produced, fetched := 0, 0
		if body != nil {
			produced = int(body.n)
		}
		if kind == quota.ConsumerByteRate {
			fetched = int(cw.n)
		}
		s.quotas.Charge(t, user, "", produced, fetched, time.Since(start))
	})
}

// countingBody counts the request body bytes a handler read.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// countingWriter counts the response body bytes; Unwrap keeps
// http.ResponseController (flushes of streams, deadlines) working.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
