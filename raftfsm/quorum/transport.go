package quorum

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/internode"
)

// The node on the inter-node port (package internode: the port mux, dialing
// and peer TLS). The node registers two protocols on it, beside
// Config.ExtraProtocols (the server's 'K' for inter-broker Kafka fetches
// and 'H' for forwarded HTTP):
//
//	'R' (ProtoRaft) hashicorp/raft's transport (streamLayer)
//	'C' (ProtoRPC)  the controller RPC (rpc.go)
const (
	ProtoRaft byte = 'R'
	ProtoRPC  byte = 'C'
)

// ErrUnknownProtocol: ExtraProtocols names a reserved byte.
var ErrUnknownProtocol = internode.ErrUnknownProtocol

// ErrInsecurePeers: Open refused a raft port other machines can reach
// without inter-node authentication (see Config.AllowInsecurePeers).
var ErrInsecurePeers = errors.New("raftfsm: refusing unauthenticated inter-node traffic")

// streamLayer is raft's side of the mux: a net.Listener fed by the mux's
// ProtoRaft handler and a dialer that writes ProtoRaft. Safe for
// concurrent use.
//
// It tells the leader watch (ended) when a connection a peer opened ends
// (a read error: the peer closed it, or its process died), the controller
// loop (lost) when one raft dialled does (not closed by raft: a leader's
// connections to its followers, whose heartbeat answers stop at once when
// a follower's process dies), and closes the
// connections raft dialled when it is closed: raft's Shutdown leaves
// them to the transport, and a TimeoutNow this node sent itself (standNow)
// would otherwise wait for an answer from the stopped raft until the
// transport's 10 s timeout, and Close with it.
type streamLayer struct {
	addr  net.Addr
	auth  *internode.Auth // the mux's
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
	// ended: set before the mux starts, read by connection goroutines.
	ended func(peer string)
	// lost: set at construction, called by the goroutines reading
	// dialled connections; it must not block.
	lost func()

	mu      sync.Mutex // guards dialled
	dialled map[net.Conn]struct{}
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(addr net.Addr, auth *internode.Auth, lost func()) *streamLayer {
	return &streamLayer{addr: addr, auth: auth, conns: make(chan net.Conn), done: make(chan struct{}),
		ended: func(string) {}, lost: lost, dialled: map[net.Conn]struct{}{}}
}

// deliver hands an accepted connection to raft, or closes it once raft's
// transport is closed.
func (s *streamLayer) deliver(conn net.Conn) {
	peer := ""
	if pc, ok := conn.(*internode.PeerConn); ok {
		peer = string(serverID(pc.VerifiedNodeID()))
	}
	conn = &watchedConn{Conn: conn, ended: func() { s.ended(peer) }}
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

// Close stops Accept (and deliver) and closes the connections raft
// dialled; the mux owns the real listener.
func (s *streamLayer) Close() error {
	s.once.Do(func() { close(s.done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.dialled {
		c.Close()
	}
	s.dialled = nil
	return nil
}

func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := internode.Dial(ctx, string(address), ProtoRaft, s.auth, -1)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialled == nil {
		conn.Close()
		return nil, net.ErrClosed
	}
	s.dialled[conn] = struct{}{}
	return &dialledConn{Conn: conn, s: s}, nil
}

// dialledConn leaves the stream layer's set when raft closes it, and
// calls the stream layer's lost once, at its first read error that is not
// its own Close.
type dialledConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

func (c *dialledConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.once.Do(c.s.lost)
	}
	return n, err
}

func (c *dialledConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.dialled, c.Conn)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// watchedConn calls ended once, at its first read error: raft reads an
// accepted connection until it ends.
type watchedConn struct {
	net.Conn
	once  sync.Once
	ended func()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(c.ended)
	}
	return n, err
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
