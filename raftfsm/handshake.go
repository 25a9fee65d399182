package raftfsm

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Mux authentication. With Config.ClusterSecret set, every connection to
// the port proves, right after its protocol byte, that both ends hold the
// secret (a challenge-response; the secret never crosses the wire):
//
//	server -> client  version (1 byte, handshakeVersion) | server nonce (16)
//	client -> server  client nonce (16) | HMAC-SHA256(secret, "runnel-mux-v1" | proto | server nonce | client nonce)
//	server -> client  HMAC-SHA256(secret, "runnel-mux-v1-ok" | proto | client nonce | server nonce)
//
// Either side closes the connection on a mismatch. The MACs cover the
// protocol byte, so an authenticated connection cannot be replayed for
// another protocol, and both nonces, so no answer can be replayed at all.
// A version byte other than handshakeVersion makes the client give up with
// ErrHandshakeVersion: a later version changes the byte and both labels.
// The traffic after the handshake is not encrypted.
//
// With no secret there is no handshake (and the node logs that its port is
// unauthenticated). A node with a secret and one without cannot talk: the
// one without takes the challenge for protocol bytes, or waits for a
// challenge that never comes, until the handshake deadline.

const (
	handshakeVersion byte = 1
	nonceLen              = 16
	macLen                = sha256.Size
	// handshakeTimeout bounds the whole handshake on either side.
	handshakeTimeout = 5 * time.Second
	// authWarnEvery rate-limits the WARN lines for rejected connections.
	authWarnEvery = 10 * time.Second

	labelClient = "runnel-mux-v1"
	labelServer = "runnel-mux-v1-ok"
)

// ErrAuth: the peer does not hold the cluster secret (or did not answer the
// challenge in time). ErrHandshakeVersion: the peer speaks another version
// of the handshake.
var (
	ErrAuth             = errors.New("raftfsm: mux authentication failed")
	ErrHandshakeVersion = errors.New("raftfsm: mux handshake version mismatch")
)

func handshakeMAC(secret []byte, label string, proto byte, first, second []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write([]byte{proto})
	h.Write(first)
	h.Write(second)
	return h.Sum(nil)
}

// serverHandshake is the accepting side, after the protocol byte was read:
// it challenges rw with a nonce drawn from rnd and checks the answer. The
// caller bounds it with a deadline. Any error means rw must be closed.
func serverHandshake(rw io.ReadWriter, proto byte, secret []byte, rnd io.Reader) error {
	var hello [1 + nonceLen]byte
	hello[0] = handshakeVersion
	if _, err := io.ReadFull(rnd, hello[1:]); err != nil {
		return fmt.Errorf("raftfsm: handshake nonce: %w", err)
	}
	serverNonce := hello[1:]
	if _, err := rw.Write(hello[:]); err != nil {
		return fmt.Errorf("raftfsm: handshake: send challenge: %w", err)
	}
	var answer [nonceLen + macLen]byte
	if _, err := io.ReadFull(rw, answer[:]); err != nil {
		return fmt.Errorf("%w: read answer: %v", ErrAuth, err)
	}
	clientNonce, mac := answer[:nonceLen], answer[nonceLen:]
	if !hmac.Equal(mac, handshakeMAC(secret, labelClient, proto, serverNonce, clientNonce)) {
		return fmt.Errorf("%w: wrong secret or handshake version", ErrAuth)
	}
	if _, err := rw.Write(handshakeMAC(secret, labelServer, proto, clientNonce, serverNonce)); err != nil {
		return fmt.Errorf("raftfsm: handshake: send proof: %w", err)
	}
	return nil
}

// clientHandshake is the dialing side, after the protocol byte was written:
// it answers the server's challenge with a nonce drawn from rnd and checks
// the server's proof. The caller bounds it with a deadline.
func clientHandshake(rw io.ReadWriter, proto byte, secret []byte, rnd io.Reader) error {
	var hello [1 + nonceLen]byte
	if _, err := io.ReadFull(rw, hello[:1]); err != nil {
		return fmt.Errorf("%w: no challenge (does the peer run without a cluster secret?): %v", ErrAuth, err)
	}
	if hello[0] != handshakeVersion {
		return fmt.Errorf("%w: peer speaks version %d, this node %d", ErrHandshakeVersion, hello[0], handshakeVersion)
	}
	if _, err := io.ReadFull(rw, hello[1:]); err != nil {
		return fmt.Errorf("%w: read challenge: %v", ErrAuth, err)
	}
	serverNonce := hello[1:]
	var answer [nonceLen + macLen]byte
	clientNonce := answer[:nonceLen]
	if _, err := io.ReadFull(rnd, clientNonce); err != nil {
		return fmt.Errorf("raftfsm: handshake nonce: %w", err)
	}
	copy(answer[nonceLen:], handshakeMAC(secret, labelClient, proto, serverNonce, clientNonce))
	if _, err := rw.Write(answer[:]); err != nil {
		return fmt.Errorf("raftfsm: handshake: send answer: %w", err)
	}
	var proof [macLen]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return fmt.Errorf("%w: no proof from peer (wrong secret?): %v", ErrAuth, err)
	}
	if !hmac.Equal(proof[:], handshakeMAC(secret, labelServer, proto, clientNonce, serverNonce)) {
		return fmt.Errorf("%w: peer's proof does not match (wrong secret)", ErrAuth)
	}
	return nil
}

// clientHandshakeConn runs clientHandshake on conn within handshakeTimeout
// (or the earlier deadline dl, when set), then clears the deadline.
func clientHandshakeConn(conn net.Conn, proto byte, secret []byte, dl time.Time) error {
	limit := time.Now().Add(handshakeTimeout)
	if !dl.IsZero() && dl.Before(limit) {
		limit = dl
	}
	_ = conn.SetDeadline(limit)
	if err := clientHandshake(conn, proto, secret, rand.Reader); err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	return nil
}

// warnLimiter logs at most one WARN line per period; the lines it holds
// back are counted in the next one. Safe for concurrent use.
type warnLimiter struct {
	log    *slog.Logger
	period time.Duration

	mu         sync.Mutex // guards last and suppressed
	last       time.Time
	suppressed int
}

func (w *warnLimiter) warn(msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < w.period {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	w.log.Warn(msg, args...)
}
