package kafkaproto

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xdg-go/scram"
)

// SASL: a client connection authenticates with SaslHandshake (v1) then
// SaslAuthenticate (PLAIN: one round; SCRAM-SHA-256/512: two), or by the
// client certificate it showed on a TLS listener with a client CA (mTLS,
// principal User:<certificate CN>). The principal is kept in the
// connection's state; with Options.RequireAuth a client connection without
// one may only send ApiVersions, SaslHandshake and SaslAuthenticate (any
// other request closes it, as Kafka does). Connections on the peer door
// are authenticated by the raft port (cluster secret or node mTLS) and need
// no SASL. SaslHandshake v0 (raw, unframed tokens) is listed but refused;
// see saslhandshake.go.
//
// Re-authentication (KIP-368, Options.MaxReauth > 0): a login lasts
// MaxReauth (SaslAuthenticate v1+ answers it in SessionLifetimeMs); the
// client logs in again on the same connection with SaslHandshake and
// SaslAuthenticate, with the same mechanism and as the same principal (else
// the connection is answered ILLEGAL_SASL_STATE / SASL_AUTHENTICATION_FAILED
// and closed). Any other request after the session ended closes the
// connection, as Kafka does, so a deleted user or a changed password stops
// working on open connections within MaxReauth.

// SASL mechanism names.
const (
	mechPlain     = "PLAIN"
	mechScram256  = "SCRAM-SHA-256"
	mechScram512  = "SCRAM-SHA-512"
	principalUser = "User:"
)

// saslMechanisms is what SaslHandshake offers, in Kafka's order.
var saslMechanisms = []string{mechPlain, mechScram256, mechScram512}

// saslState is a connection's progress through SASL; owned by the
// connection's goroutine.
type saslState struct {
	mechanism string                    // chosen by SaslHandshake; "" none yet
	scram     *scram.ServerConversation // SCRAM in progress
}

// Principal returns the authenticated principal of the connection a
// request came on ("User:alice"), or "" for an anonymous one.
func Principal(ctx context.Context) string {
	if st, _ := ctx.Value(connStateKey{}).(*connState); st != nil {
		return st.principal
	}
	return ""
}

// certPrincipal sets the principal from a verified client certificate once
// the TLS handshake is done (it runs on the first read).
func (st *connState) certPrincipal(c *tls.Conn) {
	if st.principal != "" || st.certChecked {
		return
	}
	cs := c.ConnectionState()
	if !cs.HandshakeComplete {
		return
	}
	st.certChecked = true
	if len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		if cn := cs.VerifiedChains[0][0].Subject.CommonName; cn != "" {
			st.principal = principalUser + cn
		}
	}
}

// preAuthKey reports whether a request may come before authentication.
func preAuthKey(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

var errUnauthenticated = errors.New("kafkaproto: request before authentication")

// checkAuth refuses (closing the connection, as Kafka does) a request
// that needs an authenticated client when the connection has none.
func (c *conn) checkAuth(key int16) error {
	if tc, ok := c.nc.(*tls.Conn); ok {
		c.state.certPrincipal(tc)
	}
	if st := &c.state; !st.sessionExpiry.IsZero() && !c.s.opts.now().Before(st.sessionExpiry) &&
		key != saslHandshakeKey && (key != saslAuthenticateKey || st.sasl.mechanism == "") {
		// KIP-368: after the session ended only a re-authentication may
		// come (Kafka closes the connection on anything else).
		return fmt.Errorf("%w: %s", errSessionExpired, kmsg.NameForKey(key))
	}
	if !c.s.opts.RequireAuth || c.state.door == peerDoor || c.state.principal != "" || preAuthKey(key) {
		return nil
	}
	return fmt.Errorf("%w: %s", errUnauthenticated, kmsg.NameForKey(key))
}

var (
	errSessionExpired = errors.New("kafkaproto: SASL session expired")
	errReauthRefused  = errors.New("kafkaproto: SASL re-authentication refused")
)

// loggedIn ends a successful SASL exchange: user is the principal now,
// until now+Options.MaxReauth when that is set. A re-authentication must
// name the principal of the first login; otherwise it fails (and the
// connection closes, as Kafka does).
func (s *Server) loggedIn(st *connState, user string) error {
	if st.saslDone && st.principal != principalUser+user {
		return errReauthRefused
	}
	st.principal, st.saslDone, st.saslMech, st.sasl = principalUser+user, true, st.sasl.mechanism, saslState{}
	if s.opts.MaxReauth > 0 {
		st.sessionExpiry = s.opts.now().Add(s.opts.MaxReauth)
	}
	return nil
}
