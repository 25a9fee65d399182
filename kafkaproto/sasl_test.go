package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// The memBroker keeps one user, alice, for SASL tests.
const testUser, testPassword = "alice", "alice-secret"

func (b *memBroker) ScramCredential(mechanism, user string) (ScramCredential, bool) {
	hash := scram.SHA256
	if mechanism == mechScram512 {
		hash = scram.SHA512
	}
	if user != testUser {
		return ScramCredential{}, false
	}
	c, err := hash.NewClient(testUser, testPassword, "")
	if err != nil {
		panic(err)
	}
	sc, err := c.GetStoredCredentialsWithError(scram.KeyFactors{Salt: "test-salt", Iters: 4096})
	if err != nil {
		panic(err)
	}
	return ScramCredential{Salt: []byte(sc.Salt), Iterations: sc.Iters, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, true
}

func (b *memBroker) CheckPassword(user, password string) bool {
	return (user == testUser || user == "mallory" && b.altUser.Load()) && password == testPassword
}

// saslSweepKeys are covered by TestSASL and TestACLAPIs.
var saslSweepKeys = []int16{saslHandshakeKey, saslAuthenticateKey, int16(kmsg.CreateACLs), int16(kmsg.DescribeACLs), int16(kmsg.DeleteACLs)}

func saslHandshakeReq(mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = 1, mech
	return r
}

func saslAuth(t *testing.T, c net.Conn, v int16, msg []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = v, msg
	return roundTrip(t, c, r).(*kmsg.SASLAuthenticateResponse)
}

func metadataOK(t *testing.T, c net.Conn) {
	t.Helper()
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 4
	if resp := roundTrip(t, c, r).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		t.Fatalf("metadata %+v", resp)
	}
}

// scramLogin runs a SCRAM conversation with SaslAuthenticate version v.
func scramLogin(t *testing.T, c net.Conn, mech string, v int16, password string) int16 {
	t.Helper()
	if resp := roundTrip(t, c, saslHandshakeReq(mech)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake %s: %+v", mech, resp)
	}
	hash := scram.SHA256
	if mech == mechScram512 {
		hash = scram.SHA512
	}
	client, err := hash.NewClient(testUser, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	var in string
	for !conv.Done() {
		out, err := conv.Step(in)
		if err != nil {
			t.Fatalf("client step: %v", err)
		}
		if conv.Done() {
			break
		}
		resp := saslAuth(t, c, v, []byte(out))
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		in = string(resp.SASLAuthBytes)
	}
	if !conv.Valid() {
		t.Fatal("server signature not valid")
	}
	return 0
}

// TestSASL: PLAIN and SCRAM-SHA-256/512 over every SaslAuthenticate
// version; wrong passwords and unknown users answer
// SASL_AUTHENTICATION_FAILED; with RequireAuth a request before
// authentication closes the connection and one after it is served.
func TestSASL(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{RequireAuth: true})
	for v := int16(saslAuthenticateMin); v <= saslAuthenticateMax; v++ {
		t.Run(fmt.Sprintf("PLAIN/v%d", v), func(t *testing.T) {
			c := dial(t, addr)
			if resp := roundTrip(t, c, saslHandshakeReq(mechPlain)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 || len(resp.SupportedMechanisms) != 3 {
				t.Fatalf("handshake %+v", resp)
			}
			if resp := saslAuth(t, c, v, []byte("\x00alice\x00wrong")); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
				t.Fatalf("wrong password: %+v", resp)
			}
			roundTrip(t, c, saslHandshakeReq(mechPlain))
			if resp := saslAuth(t, c, v, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != 0 {
				t.Fatalf("login: %+v", resp)
			}
			metadataOK(t, c)
			if resp := roundTrip(t, c, saslHandshakeReq(mechPlain)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
				t.Fatalf("second handshake: %+v", resp)
			}
		})
		for _, mech := range []string{mechScram256, mechScram512} {
			t.Run(fmt.Sprintf("%s/v%d", mech, v), func(t *testing.T) {
				c := dial(t, addr)
				if code := scramLogin(t, c, mech, v, "wrong"); code != kerr.SaslAuthenticationFailed.Code {
					t.Fatalf("wrong password: code %d", code)
				}
				if code := scramLogin(t, c, mech, v, testPassword); code != 0 {
					t.Fatalf("login: code %d", code)
				}
				metadataOK(t, c)
			})
		}
	}
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := dial(t, addr)
		v0 := saslHandshakeReq(mechPlain)
		v0.Version = 0
		if resp := roundTrip(t, c, v0).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v0 handshake: %+v", resp)
		}
		if resp := roundTrip(t, c, saslHandshakeReq("GSSAPI")).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("GSSAPI: %+v", resp)
		}
		if resp := saslAuth(t, c, 1, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("authenticate without handshake: %+v", resp)
		}
	})
	t.Run("unauthenticated request closes", func(t *testing.T) {
		c := dial(t, addr)
		roundTrip(t, c, apiVersionsRequest(3))
		r := kmsg.NewPtrMetadataRequest()
		r.Version = 4
		c.Write(testFormatter.AppendRequest(nil, r, 1))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("read after unauthenticated metadata: %v, want EOF", err)
		}
	})
}

// Without RequireAuth (the default) requests need no login, and a client
// may still log in.
func TestSASLOptional(t *testing.T) {
	addr, _ := startServer(t, newMemBroker(), Options{})
	c := dial(t, addr)
	metadataOK(t, c)
	if code := scramLogin(t, c, mechScram256, 2, testPassword); code != 0 {
		t.Fatalf("login: %d", code)
	}
	metadataOK(t, c)
}

// FuzzSASLAuthenticate feeds arbitrary SaslAuthenticate tokens (two, as a
// SCRAM exchange has) to PLAIN and SCRAM-SHA-256/512 conversations. It
// must not panic, and a connection may end up logged in only as the one
// user the broker knows.
func FuzzSASLAuthenticate(f *testing.F) {
	f.Add(byte(0), []byte("\x00alice\x00"+testPassword), []byte(nil))
	f.Add(byte(0), []byte("alice\x00alice\x00x"), []byte(nil))
	f.Add(byte(1), []byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(byte(2), []byte("n,a=bob,n=alice,r=x"), []byte("c=eSws,r=x,p="))
	s := NewServer(newMemBroker(), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequireAuth: true})
	defer s.Close()
	mechs := []string{mechPlain, mechScram256, mechScram512}
	f.Fuzz(func(t *testing.T, mech byte, first, second []byte) {
		st := &connState{door: clientDoor, peerID: -1}
		st.sasl.mechanism = mechs[int(mech)%len(mechs)]
		ctx := withConnState(context.Background(), st)
		for _, tok := range [][]byte{first, second} {
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.Version, req.SASLAuthBytes = 2, tok
			s.saslAuthenticate(ctx, req)
			if st.principal != "" && st.principal != "User:"+testUser {
				t.Fatalf("logged in as %q", st.principal)
			}
		}
	})
}

// testClock is a settable clock for Options.now.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// expectClosed fails unless the server closes c (after any responses
// already queued).
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := c.Read(make([]byte, 512)); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read: %v, want the connection closed", err)
			}
			return
		}
	}
}

// TestSASLReauth: with MaxReauth (connections.max.reauth.ms, KIP-368) a
// SaslAuthenticate v1+ answers the session lifetime, the same principal
// may log in again on the same connection with the same mechanism, a
// different principal or mechanism is refused and the connection closed,
// and a request after the session expired closes the connection.
func TestSASLReauth(t *testing.T) {
	clk := &testClock{}
	clk.ns.Store(time.Now().UnixNano())
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{RequireAuth: true, MaxReauth: time.Minute, now: clk.now})
	plainLogin := func(t *testing.T, c net.Conn, mech, msg string) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		if resp := roundTrip(t, c, saslHandshakeReq(mech)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("handshake: %+v", resp)
		}
		return saslAuth(t, c, 1, []byte(msg))
	}
	t.Run("lifetime and re-authentication", func(t *testing.T) {
		c := dial(t, addr)
		if resp := plainLogin(t, c, mechPlain, "\x00alice\x00"+testPassword); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Minute.Milliseconds() {
			t.Fatalf("login: %+v, want lifetime 60000", resp)
		}
		metadataOK(t, c)
		clk.add(50 * time.Second)
		if resp := plainLogin(t, c, mechPlain, "\x00alice\x00"+testPassword); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Minute.Milliseconds() {
			t.Fatalf("re-authentication: %+v", resp)
		}
		clk.add(50 * time.Second) // past the first session, within the second
		metadataOK(t, c)
		// SCRAM re-authentication on a SCRAM session.
		c2 := dial(t, addr)
		if code := scramLogin(t, c2, mechScram512, 2, testPassword); code != 0 {
			t.Fatalf("scram login: %d", code)
		}
		if code := scramLogin(t, c2, mechScram512, 2, testPassword); code != 0 {
			t.Fatalf("scram re-authentication: %d", code)
		}
		metadataOK(t, c2)
	})
	t.Run("v0 has no lifetime field but the session still ends", func(t *testing.T) {
		c := dial(t, addr)
		roundTrip(t, c, saslHandshakeReq(mechPlain))
		if resp := saslAuth(t, c, 0, []byte("\x00alice\x00"+testPassword)); resp.ErrorCode != 0 {
			t.Fatalf("login: %+v", resp)
		}
		clk.add(2 * time.Minute)
		r := kmsg.NewPtrMetadataRequest()
		r.Version = 4
		c.Write(testFormatter.AppendRequest(nil, r, 1))
		expectClosed(t, c)
	})
	t.Run("different principal refused", func(t *testing.T) {
		c := dial(t, addr)
		if resp := plainLogin(t, c, mechPlain, "\x00alice\x00"+testPassword); resp.ErrorCode != 0 {
			t.Fatalf("login: %+v", resp)
		}
		b.altUser.Store(true)
		defer b.altUser.Store(false)
		if resp := plainLogin(t, c, mechPlain, "\x00mallory\x00"+testPassword); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication as another user: %+v", resp)
		}
		expectClosed(t, c)
	})
	t.Run("different mechanism refused", func(t *testing.T) {
		c := dial(t, addr)
		if resp := plainLogin(t, c, mechPlain, "\x00alice\x00"+testPassword); resp.ErrorCode != 0 {
			t.Fatalf("login: %+v", resp)
		}
		if resp := roundTrip(t, c, saslHandshakeReq(mechScram256)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("handshake with another mechanism: %+v", resp)
		}
		expectClosed(t, c)
	})
	t.Run("expired session closes", func(t *testing.T) {
		c := dial(t, addr)
		if resp := plainLogin(t, c, mechPlain, "\x00alice\x00"+testPassword); resp.ErrorCode != 0 {
			t.Fatalf("login: %+v", resp)
		}
		metadataOK(t, c)
		clk.add(time.Minute + time.Millisecond)
		r := kmsg.NewPtrMetadataRequest()
		r.Version = 4
		c.Write(testFormatter.AppendRequest(nil, r, 1))
		expectClosed(t, c)
	})
}
