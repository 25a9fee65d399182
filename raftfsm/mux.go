package raftfsm

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// Kafka fetches).
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
// byte is read, plus the handlers' own (see handle); close stops the loop,
// closes the listener and waits for them.
type mux struct {
	ln       net.Listener
	handlers map[byte]func(net.Conn) // fixed after newMux
	raft     *streamLayer
	wg       sync.WaitGroup
	once     sync.Once
	done     chan struct{}
}

// newMux listens on bind; adv is the address peers dial to reach it.
func newMux(bind string, adv net.Addr, extra map[byte]func(net.Conn)) (*mux, error) {
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
	m := &mux{ln: ln, handlers: map[byte]func(net.Conn){}, done: make(chan struct{})}
	m.raft = &streamLayer{addr: adv, conns: make(chan net.Conn), done: make(chan struct{})}
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
			select {
			case <-m.done:
				return
			default:
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

// dispatch reads the protocol byte and calls its handler, which owns conn.
func (m *mux) dispatch(conn net.Conn) {
	var b [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(protoReadTimeout))
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	h, ok := m.handlers[b[0]]
	if !ok {
		conn.Close()
		return
	}
	h(conn)
}

// close stops accepting and waits for the dispatching goroutines (handlers
// must return once the node closes; see Config.ExtraProtocols).
func (m *mux) close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.raft.Close()
		m.wg.Wait()
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("raftfsm: close listener: %w", err)
	}
	return nil
}

// dialProto dials addr and writes the protocol byte.
func dialProto(ctx context.Context, addr string, proto byte) (net.Conn, error) {
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
	return conn, nil
}

// streamLayer is raft's side of the mux: a net.Listener fed by the mux and
// a dialer that writes ProtoRaft. Safe for concurrent use.
type streamLayer struct {
	addr  net.Addr
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
	return dialProto(ctx, string(address), ProtoRaft)
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
