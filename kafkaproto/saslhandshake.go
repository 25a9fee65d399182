package kafkaproto

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake, key 17: versions 0-1. Picks the mechanism the next
// SaslAuthenticate requests use; see sasl.go. Version 0 is advertised
// because librdkafka requires it to be listed before it does SASL at all,
// but it is answered UNSUPPORTED_VERSION: v0 would be followed by raw,
// unframed tokens, and every client that knows SaslAuthenticate (librdkafka,
// franz-go, sarama with SASLHandshakeV1, the Java client) uses v1.
const (
	saslHandshakeKey = 17
	saslHandshakeMin = 0
	saslHandshakeMax = 1
)

func (s *Server) saslHandshake(ctx context.Context, req *kmsg.SASLHandshakeRequest) *kmsg.SASLHandshakeResponse {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if _, ok := s.broker.(Authenticator); ok {
		resp.SupportedMechanisms = slices.Clone(saslMechanisms)
	}
	switch {
	case req.Version == 0:
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	case st == nil || st.sasl.scram != nil || st.saslDone && s.opts.MaxReauth <= 0:
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case st.saslDone && req.Mechanism != st.saslMech:
		// KIP-368: a re-authentication keeps the mechanism; Kafka answers
		// ILLEGAL_SASL_STATE and closes the connection.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		st.closeNow = true
	case !slices.Contains(resp.SupportedMechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		st.sasl = saslState{mechanism: req.Mechanism}
	}
	return resp
}

func saslHandshakeError(req *kmsg.SASLHandshakeRequest, code int16) *kmsg.SASLHandshakeResponse {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = code
	return resp
}
