package internode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/runnel/runnel/internal/warnlimit"
)

// One port, several protocols. Every connection to the port starts with one
// byte naming its protocol; the dialer (Dial) writes it, the Mux reads it
// and hands the connection to the handler registered for it (Handle). With
// an Auth, the protocol byte is followed by a mutual TLS handshake
// (peertls.go) before any handler sees the connection, which is then a
// *PeerConn.

// ErrUnknownProtocol: a protocol byte registered twice.
var ErrUnknownProtocol = errors.New("internode: unknown protocol byte")

const (
	// protoReadTimeout bounds how long an accepted connection may take to
	// send its protocol byte.
	protoReadTimeout = 10 * time.Second
	// handshakeTimeout bounds an inter-node TLS handshake on either side.
	handshakeTimeout = 5 * time.Second
	// authWarnEvery rate-limits the WARN lines for rejected connections.
	authWarnEvery = 10 * time.Second
)

// Mux accepts on one listener and dispatches connections by their first
// byte. Goroutines: the accept loop and one per connection while its first
// byte is read and its handshake runs, plus the handlers' own (see Handle);
// Close stops the loop, closes the listener and the connections not yet
// handed on, and waits for them.
type Mux struct {
	ln       net.Listener
	handlers map[byte]func(net.Conn) // fixed after Start
	auth     *Auth                   // nil: plaintext, no handshake
	rejects  *warnlimit.Limiter
	wg       sync.WaitGroup
	once     sync.Once
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
}

// Listen listens on bind. With auth every connection, accepted or dialled,
// runs mutual TLS (peertls.go); log receives the rejections.
func Listen(bind string, auth *Auth, log *slog.Logger) (*Mux, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("internode: listen on %s: %w", bind, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Mux{ln: ln, handlers: map[byte]func(net.Conn){}, auth: auth,
		rejects: warnlimit.New(log, authWarnEvery)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if auth == nil {
		// A warning where others can reach the port; on loopback (the
		// single-node default) only this machine can, so a normal start
		// stays free of warnings.
		level := slog.LevelWarn
		if IsLoopbackAddr(ln.Addr()) {
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "internode: no inter-node authentication: the raft port accepts unauthenticated connections from anyone who can reach it", "addr", ln.Addr().String())
	} else {
		log.Info("internode: inter-node mutual TLS", "addr", ln.Addr().String(), "credentials", auth.mode)
	}
	return m, nil
}

// Addr is the listener's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Handle registers the handler of a protocol byte; before Start only. The
// handler owns the connection and must return (or hand it to a goroutine
// it stops) once the Mux's owner closes.
func (m *Mux) Handle(proto byte, h func(net.Conn)) error {
	if _, ok := m.handlers[proto]; ok {
		return fmt.Errorf("%w: %q is taken", ErrUnknownProtocol, proto)
	}
	m.handlers[proto] = h
	return nil
}

// Start starts the accept loop.
func (m *Mux) Start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.acceptLoop()
	}()
}

func (m *Mux) acceptLoop() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.dispatch(conn)
		}()
	}
}

// dispatch reads the protocol byte, runs the TLS handshake when the mux
// authenticates and calls the protocol's handler, which owns the
// connection. Until then close closes conn.
func (m *Mux) dispatch(conn net.Conn) {
	stop := context.AfterFunc(m.ctx, func() { conn.Close() })
	c, h := m.open(conn)
	if !stop() || h == nil {
		conn.Close()
		return
	}
	h(c)
}

// open reads conn's protocol byte and authenticates the peer; a nil
// handler: conn is to be closed.
func (m *Mux) open(conn net.Conn) (net.Conn, func(net.Conn)) {
	var b [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(protoReadTimeout))
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return nil, nil
	}
	h, ok := m.handlers[b[0]]
	if !ok {
		return nil, nil
	}
	_ = conn.SetDeadline(time.Time{})
	if m.auth == nil {
		return conn, h
	}
	ctx, cancel := context.WithTimeout(m.ctx, handshakeTimeout)
	defer cancel()
	pc, err := m.auth.server(ctx, conn, b[0])
	if err != nil {
		if m.ctx.Err() == nil {
			m.rejects.Warn("internode: rejected connection on the raft port",
				"remote", conn.RemoteAddr().String(), "proto", string(b[:]), "err", err)
		}
		return nil, nil
	}
	return pc, h
}

// Close stops accepting and waits for the dispatching goroutines (a
// handler that blocks must be unblocked by its owner first).
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		m.cancel()
		err = m.ln.Close()
		m.wg.Wait()
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("internode: close listener: %w", err)
	}
	return nil
}

// Dial dials addr, writes the protocol byte and, with auth, runs the
// client side of the TLS handshake (bounded by ctx and handshakeTimeout),
// requiring the peer to be node want (-1: any member of the cluster).
func Dial(ctx context.Context, addr string, proto byte, auth *Auth, want int32) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("internode: dial %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("internode: dial %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	if auth == nil {
		return conn, nil
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	pc, err := auth.client(hctx, conn, proto, want)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("internode: dial %s: %w", addr, err)
	}
	return pc, nil
}

// IsLoopbackHost: addr ("host:port") names a loopback host, so only this
// machine can reach a listener bound to it.
func IsLoopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr: a TCP address on a loopback interface.
func IsLoopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
