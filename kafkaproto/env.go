package kafkaproto

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// The Server is the kapi.Env of every handler: the API families reach the
// Broker and the request's connection only through these methods.
var _ kapi.Env = (*Server)(nil)

// Broker is the Broker the Server serves.
func (s *Server) Broker() Broker { return s.broker }

// MaxAdminTopics is Options.MaxAdminTopics.
func (s *Server) MaxAdminTopics() int { return s.opts.MaxAdminTopics }

// Endpoint is b's address on the listener the request's connection came
// through; ok is false when b has no such listener.
func (s *Server) Endpoint(ctx context.Context, b *BrokerInfo) (host string, port int32, ok bool) {
	return endpoint(ctx, b)
}

// Authorized reports whether the request's principal may do op on the
// resource: true without a KafkaAuthorizer, without Options.RequireAuth,
// on the peer door, or when ctx carries no connection (the listener puts
// it there only for the APIs readsConn lists, conn.go).
func (s *Server) Authorized(ctx context.Context, resourceType, name, op string) bool {
	az, ok := s.broker.(KafkaAuthorizer)
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if !ok || !s.opts.RequireAuth || st == nil || st.door == peerDoor {
		return true
	}
	return az.Authorize(st.principal, kapi.ClientOf(ctx).Host, resourceType, name, op)
}

// endpoint is b's address on the listener the request's connection came
// through; ok is false when b has no such listener.
func endpoint(ctx context.Context, b *BrokerInfo) (host string, port int32, ok bool) {
	if st, _ := ctx.Value(connStateKey{}).(*connState); st != nil && st.tls {
		return b.SSLHost, b.SSLPort, b.SSLPort != 0
	}
	return b.Host, b.Port, b.Port != 0
}

// advertisesBrokers: responses of these APIs carry broker endpoints, which
// depend on the listener (see endpoint).
func advertisesBrokers(key int16) bool {
	switch key {
	case metadataKey, int16(kmsg.FindCoordinator), int16(kmsg.DescribeCluster), produceKey:
		return true
	}
	return false
}
