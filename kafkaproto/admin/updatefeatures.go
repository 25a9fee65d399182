package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// UpdateFeatures, key 57: versions 0-2 (flexible; ValidateOnly and
// UpgradeType from 1, no per-feature results from 2). Kafka applies a
// request atomically: the first failing update is the top-level error and
// (before v2) every feature's result. runnel's levels are fixed
// (kapi/features.go), so a request succeeds only when it asks for each named
// feature's finalized level (a no-op, with or without ValidateOnly);
// anything else is INVALID_UPDATE_VERSION naming the supported level, a
// duplicate feature or a bad upgrade type INVALID_REQUEST.
const (
	updateFeaturesKey = 57
	updateFeaturesMin = 0
	updateFeaturesMax = 2
)

// Upgrade types of UpdateFeatures v1+ (v0: AllowDowngrade picks 1 or 2).
const (
	upgradeOnly     = 1
	safeDowngrade   = 2
	unsafeDowngrade = 3
)

func updateFeatures(env kapi.Env, _ context.Context, req *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	return updateFeaturesResult(req, checkFeatureUpdates(req))
}

// checkFeatureUpdates returns the first update runnel cannot make, or nil.
func checkFeatureUpdates(req *kmsg.UpdateFeaturesRequest) error {
	seen := map[string]bool{}
	for _, u := range req.FeatureUpdates {
		if seen[u.Feature] {
			return fmt.Errorf("%w: feature %q named twice", kapi.ErrInvalidRequest, u.Feature)
		}
		seen[u.Feature] = true
		if err := checkFeatureUpdate(req.Version, u); err != nil {
			return err
		}
	}
	return nil
}

func checkFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) error {
	typ := u.UpgradeType
	if version == 0 {
		typ = upgradeOnly
		if u.AllowDowngrade {
			typ = safeDowngrade
		}
	}
	if typ < upgradeOnly || typ > unsafeDowngrade {
		return fmt.Errorf("%w: upgrade type %d of %q, want 1 (upgrade), 2 (safe downgrade) or 3 (unsafe downgrade)", kapi.ErrInvalidRequest, typ, u.Feature)
	}
	f, ok := kapi.FindFeature(u.Feature)
	if !ok {
		return fmt.Errorf("%w: feature %q is not supported", kapi.ErrInvalidUpdateVersion, u.Feature)
	}
	level := max(u.MaxVersionLevel, 0) // below 1: delete the feature (level 0)
	switch {
	case level == f.FinalizedLevel:
		return nil
	case level < f.FinalizedLevel && typ == upgradeOnly:
		return fmt.Errorf("%w: %q would go down from %d to %d; a downgrade needs the safe or unsafe downgrade type",
			kapi.ErrInvalidUpdateVersion, u.Feature, f.FinalizedLevel, level)
	}
	return fmt.Errorf("%w: %q can only be at level %d here (supported %d-%d), not %d",
		kapi.ErrInvalidUpdateVersion, u.Feature, f.FinalizedLevel, f.Min, f.Max, level)
}

// updateFeaturesResult answers every update with err's code (0 for nil).
func updateFeaturesResult(req *kmsg.UpdateFeaturesRequest, err error) *kmsg.UpdateFeaturesResponse {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	code := kapi.KafkaErr(err)
	var msg *string
	if err != nil {
		msg = kapi.ErrMessage(err)
	}
	resp.ErrorCode, resp.ErrorMessage = code, msg
	for _, u := range req.FeatureUpdates {
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature, r.ErrorCode, r.ErrorMessage = u.Feature, code, msg
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func updateFeaturesError(req *kmsg.UpdateFeaturesRequest, code int16) *kmsg.UpdateFeaturesResponse {
	resp := updateFeaturesResult(req, nil)
	resp.ErrorCode = code
	for i := range resp.Results {
		resp.Results[i].ErrorCode = code
	}
	return resp
}
