package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/quota"
)

// Client quotas (issue 15): stored in the metadata log
// (raftfsm.SetQuotas), resolved and metered by package quota, enforced on
// both doors. Kafka: kafkaBackend.ChargeQuota returns the throttle, which
// the listener answers in throttle_time_ms and waits out before reading
// the connection's next request. HTTP: withQuotas answers a client over
// its quota a delay of up to a second, or 429 quota-exceeded with
// Retry-After, before serving it, and charges what a served request cost. A client is the principal's user
// name (ANONYMOUS without authentication) and, on Kafka, its client id.
// Each node meters its own clients, as each Kafka broker does.

// quotaState is the quota table of the last image and the node's meters.
type quotaState struct {
	cur  atomic.Pointer[quotaEntry]
	once sync.Once
	th   *quota.Throttler
}

type quotaEntry struct {
	img *raftfsm.Image
	t   *quota.Table
}

func toQuotaEntity(e raftfsm.QuotaEntity) quota.Entity {
	return quota.Entity{User: e.User, UserDefault: e.UserDefault, ClientID: e.ClientID, ClientIDDefault: e.ClientIDDefault}
}

func fromQuotaEntity(e quota.Entity) raftfsm.QuotaEntity {
	return raftfsm.QuotaEntity{User: e.User, UserDefault: e.UserDefault, ClientID: e.ClientID, ClientIDDefault: e.ClientIDDefault}
}

// quotaTable returns the quotas of the current metadata.
func (s *Server) quotaTable() *quota.Table {
	img, _ := s.meta.Image()
	if e := s.quotas.cur.Load(); e != nil && e.img == img {
		return e.t
	}
	qs := make([]quota.Quota, 0, len(img.Quotas))
	for _, q := range img.Quotas {
		qs = append(qs, quota.Quota{Entity: toQuotaEntity(q.Entity), Values: q.Values})
	}
	t := quota.NewTable(qs)
	s.quotas.cur.Store(&quotaEntry{img: img, t: t})
	return t
}

func (s *Server) throttler() *quota.Throttler {
	s.quotas.once.Do(func() { s.quotas.th = quota.NewThrottler() })
	return s.quotas.th
}

// quotaUser is the user a principal is metered as.
func quotaUser(principal string) string {
	if u, ok := strings.CutPrefix(principal, "User:"); ok && u != "" {
		return u
	}
	return "ANONYMOUS" // Kafka's principal for a client that did not authenticate
}

// chargeQuotas charges a served request and returns the longest throttle
// of the quotas that apply (0: none).
func (s *Server) chargeQuotas(t *quota.Table, user, clientID string, produced, fetched int, elapsed time.Duration) time.Duration {
	var d time.Duration
	charge := func(kind string, amount float64) {
		if l, ok := t.Resolve(kind, user, clientID); ok {
			d = max(d, s.throttler().Charge(l, amount))
		}
	}
	if produced > 0 {
		charge(quota.ProducerByteRate, float64(produced))
	}
	if fetched > 0 {
		charge(quota.ConsumerByteRate, float64(fetched))
	}
	charge(quota.RequestPercentage, elapsed.Seconds())
	return d
}

// throttled is how long a client is still throttled by the quotas of kinds.
func (s *Server) throttled(t *quota.Table, user, clientID string, kinds ...string) time.Duration {
	var d time.Duration
	for _, k := range kinds {
		if l, ok := t.Resolve(k, user, clientID); ok {
			d = max(d, s.throttler().Throttled(l))
		}
	}
	return d
}

// listQuotas returns the stored quotas match accepts.
func (s *Server) listQuotas(match func(quota.Entity) bool) []quota.Quota {
	var out []quota.Quota
	for _, q := range s.quotaTable().Quotas() {
		if match(q.Entity) {
			out = append(out, q)
		}
	}
	return out
}

// alterQuota merges set and remove into e's current values and stores the
// result (nothing when validateOnly).
func (s *Server) alterQuota(ctx context.Context, e quota.Entity, set map[string]float64, remove []string, replace, validateOnly bool) (map[string]float64, error) {
	vals := map[string]float64{}
	if !replace {
		img, _ := s.meta.Image()
		for k, v := range img.Quotas[fromQuotaEntity(e).Key()].Values {
			vals[k] = v
		}
	}
	for _, k := range remove {
		if err := quota.CheckKey(k); err != nil {
			return nil, err
		}
		delete(vals, k)
	}
	for k, v := range set {
		vals[k] = v
	}
	if err := quota.Check(e, vals); err != nil {
		return nil, err
	}
	if validateOnly {
		return vals, nil
	}
	_, err := s.admin.Apply(ctx, raftfsm.Command{SetQuotas: &raftfsm.SetQuotas{Quotas: []raftfsm.Quota{{Entity: fromQuotaEntity(e), Values: vals}}}})
	return vals, err
}

// Kafka door.

var (
	_ kafkaproto.QuotaAdmin    = (*kafkaBackend)(nil)
	_ kafkaproto.QuotaEnforcer = (*kafkaBackend)(nil)
)

func (k *kafkaBackend) ChargeQuota(principal, clientID string, produced, fetched int, elapsed time.Duration) time.Duration {
	t := k.s.quotaTable()
	if t.Empty() {
		return 0
	}
	return k.s.chargeQuotas(t, quotaUser(principal), clientID, produced, fetched, elapsed)
}

func (k *kafkaBackend) DescribeClientQuotas(_ context.Context, fs []kafkaproto.QuotaFilter, strict bool) ([]kafkaproto.ClientQuota, error) {
	qf := make([]quota.Filter, len(fs))
	for i, f := range fs {
		if f.Type != "user" && f.Type != "client-id" {
			return nil, nil // Kafka's ip entities: runnel keeps none
		}
		qf[i] = quota.Filter{Kind: f.Type, Match: [...]string{"exact", "default", "any"}[f.Match], Name: f.Name}
	}
	var out []kafkaproto.ClientQuota
	for _, q := range k.s.listQuotas(func(e quota.Entity) bool { return quota.Matches(e, qf, strict) }) {
		out = append(out, kafkaproto.ClientQuota{Entity: toKafkaEntity(q.Entity), Values: q.Values})
	}
	return out, nil
}

func toKafkaEntity(e quota.Entity) []kafkaproto.QuotaEntityPart {
	var parts []kafkaproto.QuotaEntityPart
	name := func(def bool, n string) *string {
		if def {
			return nil
		}
		return &n
	}
	if e.User != "" || e.UserDefault {
		parts = append(parts, kafkaproto.QuotaEntityPart{Type: "user", Name: name(e.UserDefault, e.User)})
	}
	if e.ClientID != "" || e.ClientIDDefault {
		parts = append(parts, kafkaproto.QuotaEntityPart{Type: "client-id", Name: name(e.ClientIDDefault, e.ClientID)})
	}
	return parts
}

func (k *kafkaBackend) AlterClientQuota(ctx context.Context, parts []kafkaproto.QuotaEntityPart, set map[string]float64, remove []string, validateOnly bool) error {
	var e quota.Entity
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Type] {
			return fmt.Errorf("%w: entity type %s given twice", kafkaproto.ErrInvalidRequest, p.Type)
		}
		seen[p.Type] = true
		switch {
		case p.Type == "user" && p.Name == nil:
			e.UserDefault = true
		case p.Type == "user":
			e.User = *p.Name
		case p.Type == "client-id" && p.Name == nil:
			e.ClientIDDefault = true
		case p.Type == "client-id":
			e.ClientID = *p.Name
		default:
			return fmt.Errorf("%w: entity type %q (runnel keeps user and client-id quotas)", kafkaproto.ErrInvalidRequest, p.Type)
		}
	}
	_, err := k.s.alterQuota(ctx, e, set, remove, false, validateOnly)
	if errors.Is(err, quota.ErrInvalid) {
		return fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafkaError(err)
}

// HTTP door.

var _ api.QuotasBackend = (*httpBackend)(nil)

func (h *httpBackend) ListQuotas(_ context.Context, f api.QuotaEntity) ([]api.Quota, error) {
	qs := h.s.listQuotas(func(e quota.Entity) bool {
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
	vals, err := h.s.alterQuota(ctx, e, set, nil, true, false)
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
		t := s.quotaTable()
		if t.Empty() || isForwarded(r.Context()) {
			h.ServeHTTP(w, r)
			return
		}
		user, kind := quotaUser(api.PrincipalFrom(r.Context())), httpQuotaKind(r)
		kinds := []string{quota.RequestPercentage}
		if kind != "" {
			kinds = append(kinds, kind)
		}
		if d := s.throttled(t, user, "", kinds...); d > maxHTTPQuotaDelay {
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
		s.chargeQuotas(t, user, "", produced, fetched, time.Since(start))
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
