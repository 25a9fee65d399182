package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// DescribeClientQuotas, key 48: versions 0-1 (flexible from 1). Needs
// describe_configs on the cluster (kafkaproto/authz.go). Entity types user and
// client-id; a component of another type matches nothing.
const (
	describeClientQuotasKey = 48
	describeClientQuotasMin = 0
	describeClientQuotasMax = 1
)

func describeClientQuotas(env kapi.Env, ctx context.Context, req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	admin, ok := quotaAdmin(env)
	if !ok {
		return describeClientQuotasError(req, kerr.UnsupportedVersion.Code)
	}
	fs := make([]kapi.QuotaFilter, 0, len(req.Components))
	for _, c := range req.Components {
		if c.MatchType < 0 || c.MatchType > 2 || (c.MatchType == 0 && c.Match == nil) {
			return describeClientQuotasError(req, kerr.InvalidRequest.Code)
		}
		fs = append(fs, kapi.QuotaFilter{Type: c.EntityType, Match: int8(c.MatchType), Name: deref(c.Match)})
	}
	qs, err := admin.DescribeClientQuotas(ctx, fs, req.Strict)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		return resp
	}
	for _, q := range qs {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			pe := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			pe.Type, pe.Name = p.Type, p.Name
			e.Entity = append(e.Entity, pe)
		}
		for _, k := range quotaKeyOrder {
			if v, ok := q.Values[k]; ok {
				ve := kmsg.NewDescribeClientQuotasResponseEntryValue()
				ve.Key, ve.Value = k, v
				e.Values = append(e.Values, ve)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

// quotaKeyOrder is the order values are described in.
var quotaKeyOrder = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}

func describeClientQuotasError(req *kmsg.DescribeClientQuotasRequest, code int16) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = code
	return resp
}
