package httpdoor

import (
	"context"
	"errors"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/quota"
)

// Client quotas (issue 15): stored in the metadata log
// (raftfsm.SetQuotas), resolved and metered by package quota (quota.Node),
// enforced on both doors. Kafka: server/kafkadoor/quotas.go. HTTP: the
// quota API here, and quota.Node.HTTP, which answers a client over its quota a
// delay of up to a second, or 429 quota-exceeded with Retry-After, before
// serving it, and charges what a served request cost. A client is the principal's user name
// (ANONYMOUS without authentication) and, on Kafka, its client id. Each
// node meters its own clients, as each Kafka broker does.

// HTTP door.

var _ api.QuotasBackend = (*Door)(nil)

func (h *Door) ListQuotas(_ context.Context, f api.QuotaEntity) ([]api.Quota, error) {
	qs := h.cfg.Quotas.List(func(e quota.Entity) bool {
		return (f.User == "" || e.User == f.User) && (f.ClientID == "" || e.ClientID == f.ClientID) &&
			(!f.DefaultUser || e.UserDefault) && (!f.DefaultClientID || e.ClientIDDefault)
	})
	out := make([]api.Quota, len(qs))
	for i, q := range qs {
		out[i] = toAPIQuota(q.Entity, q.Values)
	}
	return out, nil
}

func (h *Door) SetQuota(ctx context.Context, q api.Quota) (api.Quota, error) {
	e := quota.Entity{User: q.Entity.User, UserDefault: q.Entity.DefaultUser, ClientID: q.Entity.ClientID, ClientIDDefault: q.Entity.DefaultClientID}
	set := map[string]float64{}
	for k, v := range map[string]*float64{quota.ProducerByteRate: q.ProducerByteRate, quota.ConsumerByteRate: q.ConsumerByteRate, quota.RequestPercentage: q.RequestPercentage} {
		if v != nil {
			set[k] = *v
		}
	}
	vals, err := h.cfg.Quotas.Alter(ctx, e, set, nil, true, false)
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
