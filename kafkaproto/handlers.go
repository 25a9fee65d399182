package kafkaproto

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/admin"
	"github.com/runnel/runnel/kafkaproto/groups"
	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/kafkaproto/txn"
)

// handle adapts a typed handler of this package (a method on *Server) to a
// kapi.Handler. The Server is the kapi.Env its handlers are called with, so
// the adapter is one type assertion, not an allocation.
func handle[Req kmsg.Request, Resp kmsg.Response](key, minV, maxV int16,
	serve func(*Server, context.Context, Req) Resp, fail func(Req, int16) Resp,
) kapi.Handler {
	return kapi.Handler{
		Key: key, Min: minV, Max: maxV,
		Serve: func(env kapi.Env, ctx context.Context, req kmsg.Request) kmsg.Response {
			return serve(env.(*Server), ctx, req.(Req))
		},
		Fail: func(req kmsg.Request, code int16) kmsg.Response { return fail(req.(Req), code) },
	}
}

// handlerTable indexes handlerList by API key.
func handlerTable() map[int16]kapi.Handler {
	t := make(map[int16]kapi.Handler)
	for _, h := range handlerList() {
		t[h.Key] = h
	}
	return t
}

// handlerList lists every API the listener implements, with the version
// range it advertises: the data path and the connection's own APIs here,
// then the API families (kafkaproto/admin, groups, txn), each listing its
// keys in its handlers.go. Each entry's constants and functions live in the
// file named after the API. A key is listed once
// (TestHandlerKeysListedOnce).
func handlerList() []kapi.Handler {
	own := []kapi.Handler{
		handle(produceKey, produceMin, produceMax, (*Server).produce, produceError),
		handle(fetchKey, fetchMin, fetchMax, (*Server).fetch, fetchError),
		handle(listOffsetsKey, listOffsetsMin, listOffsetsMax, (*Server).listOffsets, listOffsetsError),
		handle(metadataKey, metadataMin, metadataMax, (*Server).serveMetadata, metadataFail),
		handle(apiVersionsKey, apiVersionsMin, apiVersionsMax, (*Server).apiVersions, apiVersionsFail),
		handle(initProducerIDKey, initProducerIDMin, initProducerIDMax, (*Server).initProducerID, initProducerIDError),
		handle(offsetForLeaderEpochKey, offsetForLeaderEpochMin, offsetForLeaderEpochMax, (*Server).offsetForLeaderEpoch, offsetForLeaderEpochError),
		// Metadata's successor (KIP-966).
		handle(describeTopicPartitionsKey, describeTopicPartitionsMin, describeTopicPartitionsMax, (*Server).describeTopicPartitions, describeTopicPartitionsError),
		// Authentication (sasl.go).
		handle(saslHandshakeKey, saslHandshakeMin, saslHandshakeMax, (*Server).saslHandshake, saslHandshakeError),
		handle(saslAuthenticateKey, saslAuthenticateMin, saslAuthenticateMax, (*Server).saslAuthenticate, saslAuthenticateError),
		// Transactions, log side.
		handle(writeTxnMarkersKey, writeTxnMarkersMin, writeTxnMarkersMax, (*Server).writeTxnMarkers, writeTxnMarkersError),
	}
	return slices.Concat(own,
		admin.Handlers(),  // topics, configs, records, ACLs, quotas, cluster admin
		groups.Handlers(), // coordinator lookup, membership, offsets, group listings
		txn.Handlers(),    // the transaction coordinator's APIs
	)
}

// APIVersion is one supported API key and its version range.
type APIVersion struct {
	Key        int16  `json:"api_key"`
	Name       string `json:"name"`
	MinVersion int16  `json:"min_version"`
	MaxVersion int16  `json:"max_version"`
}

// SupportedVersions lists the API keys and versions the listener
// implements, sorted by key: what ApiVersions advertises.
func SupportedVersions() []APIVersion {
	var out []APIVersion
	for _, h := range handlerTable() {
		out = append(out, APIVersion{Key: h.Key, Name: kmsg.NameForKey(h.Key), MinVersion: h.Min, MaxVersion: h.Max})
	}
	slices.SortFunc(out, func(a, b APIVersion) int { return int(a.Key) - int(b.Key) })
	return out
}
