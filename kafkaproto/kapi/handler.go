package kapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler serves one API key over a range of versions: one entry of the
// listener's handler table (kafkaproto/handlers.go).
type Handler struct {
	Key      int16
	Min, Max int16
	// Serve answers a decoded request of a supported version.
	Serve func(env Env, ctx context.Context, req kmsg.Request) kmsg.Response
	// Fail answers a decoded request with code in every error field; it
	// is used for versions outside [Min, Max] that kmsg can still encode,
	// and for requests the principal may not make.
	Fail func(req kmsg.Request, code int16) kmsg.Response
}

// Handle adapts a typed handler pair to Handler.
func Handle[Req kmsg.Request, Resp kmsg.Response](key, minV, maxV int16,
	serve func(Env, context.Context, Req) Resp, fail func(Req, int16) Resp,
) Handler {
	return Handler{
		Key: key, Min: minV, Max: maxV,
		Serve: func(env Env, ctx context.Context, req kmsg.Request) kmsg.Response {
			return serve(env, ctx, req.(Req))
		},
		Fail: func(req kmsg.Request, code int16) kmsg.Response { return fail(req.(Req), code) },
	}
}

// Env is what a handler reaches besides its request: the Broker and the
// connection the request came on (through ctx). The listener
// (*kafkaproto.Server) implements it; its methods are safe for concurrent
// use and never block.
type Env interface {
	// Broker is the listener's Broker; handlers find its optional parts
	// (GroupCoordinator, ClusterAdmin, ...) with a type assertion.
	Broker() Broker
	// MaxAdminTopics bounds the topics of one admin request (CreateTopics,
	// CreatePartitions, ElectLeaders, ...): each may cost a metadata
	// proposal.
	MaxAdminTopics() int
	// Endpoint is b's address on the listener the request's connection
	// came through (plaintext or TLS); ok is false when b has no such
	// listener. It needs the connection in ctx: the listener puts it there
	// for the APIs that advertise brokers.
	Endpoint(ctx context.Context, b *BrokerInfo) (host string, port int32, ok bool)
	// Authorized reports whether the request's principal may do op on the
	// resource (true when authorization is off, on the inter-broker door,
	// or when ctx carries no connection).
	Authorized(ctx context.Context, resourceType, name, op string) bool
}
