package kapi

import (
	"context"
	"fmt"
	"time"

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

// What handlers in several packages share.

// defaultAdminTimeout bounds admin requests whose timeout is not positive.
const defaultAdminTimeout = 30 * time.Second

// AdminContext derives the context of an admin request from its timeout.
func AdminContext(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMillis) * time.Millisecond
	if d <= 0 {
		d = defaultAdminTimeout
	}
	return context.WithTimeout(ctx, d)
}

// ValidTopicName applies Kafka's topic name rules: 1-249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func ValidTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckAdminTopics bounds the topics of one admin request (CreateTopics,
// CreatePartitions, ...) by env.MaxAdminTopics: each costs a metadata
// proposal, so a request naming many could hold the controller for long.
func CheckAdminTopics(env Env, n int) error {
	if limit := env.MaxAdminTopics(); n > limit {
		return fmt.Errorf("%w: %d topics in one request, at most %d", ErrInvalidRequest, n, limit)
	}
	return nil
}
