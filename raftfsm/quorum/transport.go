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
type streamLayer struct {
	addr  net.Addr
	auth  *internode.Auth // the mux's
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(addr net.Addr, auth *internode.Auth) *streamLayer {
	return &streamLayer{addr: addr, auth: auth, conns: make(chan net.Conn), done: make(chan struct{})}
}

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

// Close stops Accept (and deliver); the mux owns the real listener.
func (s *streamLayer) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return internode.Dial(ctx, string(address), ProtoRaft, s.auth, -1)
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
