package kafkadoor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/quota"
)

// Client quotas on the Kafka door (issue 15): ChargeQuota returns the
// throttle, which the listener answers in throttle_time_ms and waits out
// before reading the connection's next request. A client is the
// principal's user name (ANONYMOUS without authentication) and its client
// id; the quotas and the meters are the node's (quota.Node).

var (
	_ kafkaproto.QuotaAdmin    = (*Backend)(nil)
	_ kafkaproto.QuotaEnforcer = (*Backend)(nil)
)

func (k *Backend) ChargeQuota(principal, clientID string, produced, fetched int, elapsed time.Duration) time.Duration {
	t := k.cfg.Quotas.Table()
	if t.Empty() {
		return 0
	}
	return k.cfg.Quotas.Charge(t, quota.User(principal), clientID, produced, fetched, elapsed)
}

func (k *Backend) DescribeClientQuotas(_ context.Context, fs []kafkaproto.QuotaFilter, strict bool) ([]kafkaproto.ClientQuota, error) {
	qf := make([]quota.Filter, len(fs))
	for i, f := range fs {
		if f.Type != "user" && f.Type != "client-id" {
			return nil, nil // Kafka's ip entities: runnel keeps none
		}
		qf[i] = quota.Filter{Kind: f.Type, Match: [...]string{"exact", "default", "any"}[f.Match], Name: f.Name}
	}
	var out []kafkaproto.ClientQuota
	for _, q := range k.cfg.Quotas.List(func(e quota.Entity) bool { return quota.Matches(e, qf, strict) }) {
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

func (k *Backend) AlterClientQuota(ctx context.Context, parts []kafkaproto.QuotaEntityPart, set map[string]float64, remove []string, validateOnly bool) error {
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
	_, err := k.cfg.Quotas.Alter(ctx, e, set, remove, false, validateOnly)
	if errors.Is(err, quota.ErrInvalid) {
		return fmt.Errorf("%w: %v", kafkaproto.ErrInvalidRequest, err)
	}
	return toKafka(err)
}
