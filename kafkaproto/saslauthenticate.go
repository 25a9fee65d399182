package kafkaproto

import (
	"bytes"
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// SaslAuthenticate, key 36: versions 0-2 (flexible from 2). Carries the
// tokens of the mechanism SaslHandshake chose; see sasl.go. A failure
// answers SASL_AUTHENTICATION_FAILED and resets the connection to before
// the handshake.
const (
	saslAuthenticateKey = 36
	saslAuthenticateMin = 0
	saslAuthenticateMax = 2
)

// Kafka's own wording, which clients show as is.
//
//lint:ignore ST1005 the message is Kafka's, capital included
var errAuthFailed = errors.New("Authentication failed: invalid credentials")

func (s *Server) saslAuthenticate(ctx context.Context, req *kmsg.SASLAuthenticateRequest) *kmsg.SASLAuthenticateResponse {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st, _ := ctx.Value(connStateKey{}).(*connState)
	auth, _ := s.broker.(Authenticator)
	if st == nil || st.sasl.mechanism == "" || auth == nil {
		return saslAuthenticateError(req, kerr.IllegalSaslState.Code)
	}
	var err error
	switch st.sasl.mechanism {
	case mechPlain:
		err = s.saslPlain(st, auth, req.SASLAuthBytes)
	default:
		resp.SASLAuthBytes, err = s.saslScram(st, auth, req.SASLAuthBytes)
	}
	if err != nil {
		s.refused.Warn("SASL authentication failed", "mechanism", st.sasl.mechanism)
		st.sasl = saslState{}
		// A failed re-authentication ends the connection (KIP-368).
		st.closeNow = st.saslDone
		resp.SASLAuthBytes = nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := errAuthFailed.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	if st.saslDone && st.sasl.mechanism == "" && !st.sessionExpiry.IsZero() {
		// Logged in (now, or again): SaslAuthenticate v1+ tells the client
		// when to re-authenticate (kmsg leaves the field out of v0).
		resp.SessionLifetimeMillis = st.sessionExpiry.Sub(s.opts.now()).Milliseconds()
	}
	return resp
}

// saslPlain checks RFC 4616's message: [authzid] NUL authcid NUL passwd.
func (s *Server) saslPlain(st *connState, auth Authenticator, msg []byte) error {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return errAuthFailed
	}
	user, authz := string(parts[1]), string(parts[0])
	if authz != "" && authz != user {
		return errAuthFailed // acting as another user is not supported
	}
	if !auth.CheckPassword(user, string(parts[2])) {
		return errAuthFailed
	}
	return s.loggedIn(st, user)
}

// saslScram runs one step of a SCRAM conversation.
func (s *Server) saslScram(st *connState, auth Authenticator, msg []byte) ([]byte, error) {
	if st.sasl.scram == nil {
		hash := scram.SHA256
		if st.sasl.mechanism == mechScram512 {
			hash = scram.SHA512
		}
		mech := st.sasl.mechanism
		srv, err := hash.NewServer(func(user string) (scram.StoredCredentials, error) {
			c, ok := auth.ScramCredential(mech, user)
			if !ok {
				return scram.StoredCredentials{}, errAuthFailed
			}
			return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
				StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
		})
		if err != nil {
			return nil, err
		}
		st.sasl.scram = srv.NewConversation()
	}
	out, err := st.sasl.scram.Step(string(msg))
	if err != nil {
		return nil, errAuthFailed
	}
	if st.sasl.scram.Done() {
		if !st.sasl.scram.Valid() {
			return nil, errAuthFailed
		}
		if err := s.loggedIn(st, st.sasl.scram.Username()); err != nil {
			return nil, err
		}
	}
	return []byte(out), nil
}

func saslAuthenticateError(req *kmsg.SASLAuthenticateRequest, code int16) *kmsg.SASLAuthenticateResponse {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = code
	return resp
}
