package kafkaproto

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// ApiVersions, key 18: versions 0-4 (flexible from 3; feature levels from 3,
// kapi/features.go). An unsupported version is answered with UNSUPPORTED_VERSION
// in a v0 response (conn.go).
const (
	apiVersionsKey = 18
	apiVersionsMin = 0
	apiVersionsMax = 4
)

func (s *Server) apiVersions(_ context.Context, req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	resp := s.apiVersionsError(0)
	resp.SetVersion(req.Version)
	if req.Version >= 3 {
		addFeatures(resp) // kapi/features.go
	}
	return resp
}

// apiVersionsError is a v0 ApiVersions response listing every API.
func (s *Server) apiVersionsError(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	for _, h := range s.handlers {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = h.Key, h.Min, h.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	slices.SortFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return resp
}

func apiVersionsFail(req *kmsg.ApiVersionsRequest, code int16) *kmsg.ApiVersionsResponse {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ErrorCode = code
	return resp
}

// addFeatures fills the feature fields of an ApiVersions v3+ response.
func addFeatures(resp *kmsg.ApiVersionsResponse) {
	resp.FinalizedFeaturesEpoch = kapi.FinalizedFeaturesEpoch
	for _, f := range kapi.Features() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.Name, f.Min, f.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		if f.FinalizedLevel > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, f.FinalizedLevel, f.FinalizedLevel
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
}
