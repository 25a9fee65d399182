package raftfsm

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// protoEcho is a test protocol: its handler echoes what it reads.
const protoEcho byte = 'T'

// syncBuffer is a bytes.Buffer safe for the mux's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startEchoMux runs a mux on a loopback port with secret and an echo
// handler for protoEcho; it is closed when the test ends.
func startEchoMux(t testing.TB, secret []byte, logs io.Writer) *mux {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	var handlers sync.WaitGroup
	echo := func(c net.Conn) {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
	m, err := newMux("127.0.0.1:0", nil, map[byte]func(net.Conn){protoEcho: echo}, secret,
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() {
		if err := m.close(); err != nil {
			t.Error(err)
		}
		handlers.Wait()
	})
	return m
}

// echoes dials m with secret and reports whether a message comes back
// through the echo handler, with the dial error if any.
func echoes(t testing.TB, m *mux, secret []byte, wait time.Duration) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := dialProto(ctx, m.ln.Addr().String(), protoEcho, secret)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := conn.Write([]byte("ping")); err != nil {
		return false, err
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil {
		return false, err
	}
	return string(got) == "ping", nil
}

func TestMuxHandshake(t *testing.T) {
	s1, s2 := []byte("correct horse battery staple"), []byte("correct horse battery stapler")
	tests := []struct {
		name           string
		server, client []byte
		ok             bool
		rejectLogged   bool // the server logs the remote address
	}{
		{name: "both without secret", ok: true},
		{name: "same secret", server: s1, client: s1, ok: true},
		{name: "wrong secret", server: s1, client: s2, rejectLogged: true},
		{name: "client without secret", server: s1},
		{name: "server without secret", client: s1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			m := startEchoMux(t, tc.server, &logs)
			ok, err := echoes(t, m, tc.client, time.Second)
			if ok != tc.ok {
				t.Fatalf("echo through the mux: %v (err %v), want %v", ok, err, tc.ok)
			}
			if !tc.ok && tc.client != nil && !errors.Is(err, ErrAuth) {
				t.Fatalf("client with a secret failed with %v, want ErrAuth", err)
			}
			if tc.rejectLogged {
				deadline := time.Now().Add(2 * time.Second)
				for !strings.Contains(logs.String(), "rejected connection") && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "remote=127.0.0.1:") {
					t.Fatalf("no WARN with the remote address in %q", s)
				}
			}
			if len(tc.server) == 0 && !strings.Contains(logs.String(), "unauthenticated") {
				t.Fatalf("no warning that the port is unauthenticated in %q", logs.String())
			}
		})
	}
}

// fakeServer accepts one connection, reads the protocol byte and plays
// the server side with script, for checks of the client's side.
func fakeServer(t *testing.T, script func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err == nil {
			script(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// The client checks the server too: a server without the secret that
// accepts any answer, or one speaking another version, is refused.
func TestClientRejectsServer(t *testing.T) {
	secret := []byte("s3cret")
	tests := []struct {
		name    string
		version byte
		want    error
	}{
		{name: "server without the secret", version: handshakeVersion, want: ErrAuth},
		{name: "other version", version: handshakeVersion + 1, want: ErrHandshakeVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, func(c net.Conn) {
				hello := make([]byte, 1+nonceLen)
				hello[0] = tc.version
				_, _ = c.Write(hello)
				_, _ = io.ReadFull(c, make([]byte, nonceLen+macLen))
				_, _ = c.Write(bytes.Repeat([]byte{0x5a}, macLen)) // a proof made up without the secret
				_, _ = io.Copy(io.Discard, c)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			conn, err := dialProto(ctx, addr, protoEcho, secret)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("dial: %v, want %v", err, tc.want)
			}
		})
	}
}

// Silent and garbage-sending peers neither block other connections nor
// stay open past the handshake deadline, and close does not wait for them.
func TestMuxHandshakeSilentAndGarbagePeers(t *testing.T) {
	secret := []byte("s3cret")
	m := startEchoMux(t, secret, nil)
	addr := m.ln.Addr().String()
	var silent []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{protoEcho}); err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	garbage, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	if _, err := garbage.Write(append([]byte{protoEcho}, bytes.Repeat([]byte{0xff}, nonceLen+macLen)...)); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if ok, err := echoes(t, m, secret, 2*time.Second); !ok {
		t.Fatalf("an authenticated client is blocked by silent peers: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("authenticated connection took %v behind silent peers", d)
	}

	// The garbage peer gets the challenge, then the connection closes.
	_ = garbage.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, err := io.ReadAll(garbage)
	if err != nil {
		t.Fatalf("garbage peer's connection not closed: %v", err)
	}
	if len(got) != 1+nonceLen || got[0] != handshakeVersion {
		t.Fatalf("garbage peer read %x, want only the challenge", got)
	}

	// A silent peer is dropped after handshakeTimeout, or at close.
	closed := make(chan error, 1)
	go func() { closed <- m.close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("mux close waits for silent peers")
	}
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("silent peer still open after close: %v", err)
		}
	}
}

// A silent dialer is dropped at the handshake deadline even while the mux
// runs. Slow (handshakeTimeout): skipped with -short.
func TestMuxHandshakeDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for handshakeTimeout")
	}
	m := startEchoMux(t, []byte("s3cret"), nil)
	c, err := net.Dial("tcp", m.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{protoEcho}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(3 * handshakeTimeout))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("silent peer not dropped: %v", err)
	}
	if d := time.Since(start); d < handshakeTimeout-time.Second || d > 2*handshakeTimeout {
		t.Fatalf("silent peer dropped after %v, want about %v", d, handshakeTimeout)
	}
}

// The MACs bind the protocol byte: an answer computed for one protocol
// does not open another.
func TestHandshakeMACBindsProtocol(t *testing.T) {
	secret := []byte("s3cret")
	sn, cn := bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen)
	if hmac.Equal(handshakeMAC(secret, labelClient, ProtoRaft, sn, cn), handshakeMAC(secret, labelClient, ProtoRPC, sn, cn)) {
		t.Fatal("same MAC for two protocols")
	}
	if hmac.Equal(handshakeMAC(secret, labelClient, ProtoRaft, sn, cn), handshakeMAC(secret, labelServer, ProtoRaft, cn, sn)) {
		t.Fatal("client and server MACs coincide")
	}
}

// FuzzServerHandshake: the server side reading arbitrary bytes never
// panics, writes nothing but the challenge unless it accepts, and accepts
// only an answer carrying the right MAC.
func FuzzServerHandshake(f *testing.F) {
	secret := []byte("fuzz-secret")
	serverNonce := bytes.Repeat([]byte{7}, nonceLen)
	clientNonce := bytes.Repeat([]byte{9}, nonceLen)
	valid := append(append([]byte{}, clientNonce...), handshakeMAC(secret, labelClient, protoEcho, serverNonce, clientNonce)...)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0}, nonceLen+macLen))
	f.Add([]byte("R\x01 some raft frame that is not an answer at all........"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), &out}
		err := serverHandshake(rw, protoEcho, secret, bytes.NewReader(serverNonce))
		answerOK := len(data) >= nonceLen+macLen &&
			hmac.Equal(data[nonceLen:nonceLen+macLen], handshakeMAC(secret, labelClient, protoEcho, serverNonce, data[:nonceLen]))
		if (err == nil) != answerOK {
			t.Fatalf("accepted %v, answer valid %v (err %v)", err == nil, answerOK, err)
		}
		want := 1 + nonceLen
		if err == nil {
			want += macLen
		}
		if out.Len() != want || out.Bytes()[0] != handshakeVersion {
			t.Fatalf("wrote %x", out.Bytes())
		}
	})
}

// BenchmarkDialEcho: dial, protocol byte, one echoed message, close; with
// and without a cluster secret (the handshake's cost per connection).
func BenchmarkDialEcho(b *testing.B) {
	for _, bc := range []struct {
		name   string
		secret []byte
	}{{"no-secret", nil}, {"secret", []byte("bench-secret")}} {
		b.Run(bc.name, func(b *testing.B) {
			m := startEchoMux(b, bc.secret, nil)
			for b.Loop() {
				if ok, err := echoes(b, m, bc.secret, time.Second); !ok {
					b.Fatalf("echo: %v", err)
				}
			}
		})
	}
}
