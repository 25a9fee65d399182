// Package kapitest runs handlers of the Kafka listener's API families
// in-process: Env is a kapi.Env with no listener and no network behind it,
// and Serve calls the entry of a handler list for a request, as the
// listener does once the request is decoded and authorized. It starts no
// goroutine and holds no lock.
package kapitest

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Env is a kapi.Env over a Broker. Set it up before use; it is then safe
// for concurrent use.
type Env struct {
	B kapi.Broker
	// MaxTopics is MaxAdminTopics; 0: 1000 (the listener's default).
	MaxTopics int
	// TLS: the request came on a TLS listener, so Endpoint gives a
	// broker's SSL endpoint.
	TLS bool
	// Deny, when set, makes Authorized false for the resources and
	// operations it reports.
	Deny func(resourceType, name, op string) bool
}

var _ kapi.Env = (*Env)(nil)

// Broker returns e.B.
func (e *Env) Broker() kapi.Broker { return e.B }

// MaxAdminTopics returns e.MaxTopics (1000 when 0).
func (e *Env) MaxAdminTopics() int {
	if e.MaxTopics == 0 {
		return 1000
	}
	return e.MaxTopics
}

// Endpoint returns b's SSL endpoint with e.TLS, its plaintext one otherwise.
func (e *Env) Endpoint(_ context.Context, b *kapi.BrokerInfo) (string, int32, bool) {
	if e.TLS {
		return b.SSLHost, b.SSLPort, b.SSLPort != 0
	}
	return b.Host, b.Port, b.Port != 0
}

// Authorized is false where e.Deny says so.
func (e *Env) Authorized(_ context.Context, resourceType, name, op string) bool {
	return e.Deny == nil || !e.Deny(resourceType, name, op)
}

// Serve answers req with the entry of hs for its key, at req's version,
// which the entry must serve.
func Serve[Resp kmsg.Response](env kapi.Env, hs []kapi.Handler, req kmsg.Request) Resp {
	for _, h := range hs {
		if h.Key != req.Key() {
			continue
		}
		if v := req.GetVersion(); v < h.Min || v > h.Max {
			panic(fmt.Sprintf("kapitest: %s v%d is not served (%d-%d)", kmsg.NameForKey(h.Key), v, h.Min, h.Max))
		}
		return h.Serve(env, context.Background(), req).(Resp)
	}
	panic(fmt.Sprintf("kapitest: no handler for %s", kmsg.NameForKey(req.Key())))
}
