package raftfsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One port, several protocols. Every connection to BindAddr starts with one
// byte naming its protocol; the dialer writes it, the mux reads it and hands
// the connection on. Reserved bytes:
//
//	'R' (ProtoRaft) hashicorp/raft's transport
//	'C' (ProtoRPC)  the controller RPC (rpc.go)
//
// Config.ExtraProtocols adds others (the server uses 'K' for inter-broker
// Kafka fetches and 'H' for forwarded HTTP). With inter-node authentication
// (certificates or Config.ClusterSecret), the protocol byte is followed by
// a mutual TLS handshake (peertls.go) before any handler sees the
// connection, which is then a *PeerConn.
const (
	ProtoRaft byte = 'R'
	ProtoRPC  byte = 'C'
)

// ErrUnknownProtocol: a connection opened with a byte no handler serves, or
// ExtraProtocols names a reserved byte.
var ErrUnknownProtocol = errors.New("raftfsm: unknown protocol byte")

// protoReadTimeout bounds how long an accepted connection may take to send
// its protocol byte.
const protoReadTimeout = 10 * time.Second

// mux accepts on one listener and dispatches connections by their first
// byte. Goroutines: the accept loop and one per connection while its first
// byte is read and its handshake runs, plus the handlers' own (see handle);
// close stops the loop, closes the listener and the connections not yet
// handed on, and waits for them.
type mux struct {
	ln       net.Listener
	handlers map[byte]func(net.Conn) // fixed after newMux
	raft     *streamLayer
	auth     *peerAuth // nil: plaintext, no handshake
	rejects  *WarnLimiter
	wg       sync.WaitGroup
	once     sync.Once
	ctx      context.Context // cancelled by close
	cancel   context.CancelFunc
}

// newMux listens on bind; adv is the address peers dial to reach it. With
// auth every connection, accepted or dialled, runs mutual TLS
// (peertls.go); log receives the rejections.
func newMux(bind string, adv net.Addr, extra map[byte]func(net.Conn), auth *peerAuth, log *slog.Logger) (*mux, error) {
	for b := range extra {
		if b == ProtoRaft || b == ProtoRPC {
			return nil, fmt.Errorf("%w: %q is reserved", ErrUnknownProtocol, b)
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: listen on %s: %w", bind, err)
	}
	if adv == nil {
		adv = ln.Addr()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &mux{ln: ln, handlers: map[byte]func(net.Conn){}, auth: auth,
		rejects: NewWarnLimiter(log, authWarnEvery)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.raft = &streamLayer{addr: adv, auth: auth, conns: make(chan net.Conn), done: make(chan struct{})}
	if auth == nil {
		// A warning where others can reach the port; on loopback (the
		// single-node default) only this machine can, so a normal start
		// stays free of warnings.
		level := slog.LevelWarn
		if isLoopback(ln.Addr()) {
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "raftfsm: no inter-node authentication: the raft port accepts unauthenticated connections from anyone who can reach it", "addr", ln.Addr().String())
	} else {
		log.Info("raftfsm: inter-node mutual TLS", "addr", ln.Addr().String(), "credentials", auth.mode)
	}
	m.handlers[ProtoRaft] = m.raft.deliver
	for b, h := range extra {
		m.handlers[b] = h
	}
	return m, nil
}

// handle sets the handler for a protocol byte; before start only.
func (m *mux) handle(proto byte, h func(net.Conn)) { m.handlers[proto] = h }

func (m *mux) start() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.acceptLoop()
	}()
}

func (m *mux) acceptLoop() {
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
func (m *mux) dispatch(conn net.Conn) {
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
func (m *mux) open(conn net.Conn) (net.Conn, func(net.Conn)) {
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
			m.rejects.Warn("raftfsm: rejected connection on the raft port",
				"remote", conn.RemoteAddr().String(), "proto", string(b[:]), "err", err)
		}
		return nil, nil
	}
	return pc, h
}

// close stops accepting and waits for the dispatching goroutines (handlers
// must return once the node closes; see Config.ExtraProtocols).
func (m *mux) close() error {
	var err error
	m.once.Do(func() {
		m.cancel()
		err = m.ln.Close()
		m.raft.Close()
		m.wg.Wait()
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("raftfsm: close listener: %w", err)
	}
	return nil
}

// dialProto dials addr, writes the protocol byte and, with auth, runs the
// client side of the TLS handshake (bounded by ctx and handshakeTimeout),
// requiring the peer to be node want (-1: any member of the cluster).
func dialProto(ctx context.Context, addr string, proto byte, auth *peerAuth, want int32) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: dial %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raftfsm: dial %s: %w", addr, err)
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
		return nil, fmt.Errorf("raftfsm: dial %s: %w", addr, err)
	}
	return pc, nil
}

// streamLayer is raft's side of the mux: a net.Listener fed by the mux and
// a dialer that writes ProtoRaft. Safe for concurrent use.
type streamLayer struct {
	addr  net.Addr
	auth  *peerAuth // the mux's
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// deliver hands an accepted connection to raft, or closes it once raft's
// transport is closed.
func (s *streamLayer) deliver(conn net.Conn) {
	select {
	case s.conns <- conn:
	case <-s.done:
		conn.Close()
	}
}

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; the mux owns the real listener.
func (s *streamLayer) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dialProto(ctx, string(address), ProtoRaft, s.auth, -1)
}

// advertiseAddr is the address peers dial: AdvertiseAddr, else this node's
// address in Voters, else BindAddr with an unspecified IP (":9093") replaced
// by loopback, which only suits a single node. nil when the port is 0 (the
// listener's address is used).
func advertiseAddr(cfg Config) (net.Addr, error) {
	adv := cfg.AdvertiseAddr
	for _, v := range cfg.Voters {
		if adv == "" && v.ID == cfg.NodeID {
			adv = v.Address
		}
	}
	if adv == "" {
		adv = cfg.BindAddr
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: advertise address %q: %w", adv, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	if port == "0" {
		return nil, nil
	}
	a, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("raftfsm: advertise address %q: %w", adv, err)
	}
	return a, nil
}

// loopbackHost: addr ("host:port") names a loopback host, so only this
// machine can reach a listener bound to it.
func loopbackHost(addr string) bool {
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

// ErrInsecurePeers: Open refused a raft port other machines can reach
// without inter-node authentication (see Config.AllowInsecurePeers).
var ErrInsecurePeers = errors.New("raftfsm: refusing unauthenticated inter-node traffic")

// isLoopback: a TCP address on a loopback interface.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
