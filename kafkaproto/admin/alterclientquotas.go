package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// AlterClientQuotas, key 49: versions 0-1 (flexible from 1). Needs
// alter_configs on the cluster (kafkaproto/authz.go). Each entry is applied on its
// own and answered with its own error code: INVALID_REQUEST for an entity
// type other than user and client-id, a repeated type, or an unknown key.
const (
	alterClientQuotasKey = 49
	alterClientQuotasMin = 0
	alterClientQuotasMax = 1
)

func alterClientQuotas(env kapi.Env, ctx context.Context, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	admin, ok := quotaAdmin(env)
	if !ok {
		return alterClientQuotasError(req, kerr.UnsupportedVersion.Code)
	}
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := alterClientQuotasEntry(e)
		entity := make([]kapi.QuotaEntityPart, len(e.Entity))
		for i, p := range e.Entity {
			entity[i] = kapi.QuotaEntityPart{Type: p.Type, Name: p.Name}
		}
		set, remove := map[string]float64{}, []string(nil)
		for _, op := range e.Ops {
			if op.Remove {
				remove = append(remove, op.Key)
			} else {
				set[op.Key] = op.Value
			}
		}
		if err := admin.AlterClientQuota(ctx, entity, set, remove, req.ValidateOnly); err != nil {
			re.ErrorCode, re.ErrorMessage = kapi.KafkaErr(err), kapi.ErrMessage(err)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

func alterClientQuotasEntry(e kmsg.AlterClientQuotasRequestEntry) kmsg.AlterClientQuotasResponseEntry {
	re := kmsg.NewAlterClientQuotasResponseEntry()
	for _, p := range e.Entity {
		pe := kmsg.NewAlterClientQuotasResponseEntryEntity()
		pe.Type, pe.Name = p.Type, p.Name
		re.Entity = append(re.Entity, pe)
	}
	return re
}

func alterClientQuotasError(req *kmsg.AlterClientQuotasRequest, code int16) *kmsg.AlterClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := alterClientQuotasEntry(e)
		re.ErrorCode = code
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}
