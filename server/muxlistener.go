package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Inter-broker Kafka traffic (replication fetches) arrives on the raft port:
// the port mux hands each such connection to a connListener, which the
// Kafka listener serves like any other net.Listener. So brokers reach each
// other on the address they already use for metadata, not on the Kafka
// address they advertise to clients.

// protoKafka is the first byte of an inter-broker Kafka connection on the
// raft port.
const protoKafka = 'K'

// The dialing broker opens an inter-broker Kafka connection, after the
// mux's protocol byte and handshake, with a hello naming itself:
//
//	version (1 byte, peerHelloVersion) | node id (int32, big-endian)
//
// The leader then takes replica requests on that connection only for that
// id (kafkaproto.PeerConn), so a peer claiming one id and fetching as
// another is refused. With inter-node certificates the hello must name the
// node the certificate proves (runnel-node-<id>); with --cluster-secret only
// nodes holding the secret get this far, but any of them can claim any id.
// Without inter-node authentication (loopback only, or
// --insecure-inter-node) the raft port is open to anyone who reaches it,
// and so is this door.
const (
	peerHelloVersion = 1
	peerHelloLen     = 5
	peerHelloTimeout = 10 * time.Second
)

// writePeerHello sends this broker's hello on a dialled connection.
func writePeerHello(conn net.Conn, self int32) error {
	hello := binary.BigEndian.AppendUint32([]byte{peerHelloVersion}, uint32(self))
	conn.SetWriteDeadline(time.Now().Add(peerHelloTimeout))
	defer conn.SetWriteDeadline(time.Time{})
	if _, err := conn.Write(hello); err != nil {
		return fmt.Errorf("send inter-broker hello: %w", err)
	}
	return nil
}

// readPeerHello reads the hello of an accepted inter-broker connection.
func readPeerHello(conn net.Conn) (*peerConn, error) {
	var hello [peerHelloLen]byte
	conn.SetReadDeadline(time.Now().Add(peerHelloTimeout))
	defer conn.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return nil, fmt.Errorf("read inter-broker hello: %w", err)
	}
	if hello[0] != peerHelloVersion {
		return nil, fmt.Errorf("inter-broker hello version %d, want %d", hello[0], peerHelloVersion)
	}
	id := int32(binary.BigEndian.Uint32(hello[1:]))
	if id < 0 {
		return nil, fmt.Errorf("inter-broker hello names node %d", id)
	}
	// With inter-node TLS the handshake proved who dialled: the hello
	// must name that node.
	if v, ok := conn.(interface{ VerifiedNodeID() int32 }); ok && v.VerifiedNodeID() >= 0 && v.VerifiedNodeID() != id {
		return nil, fmt.Errorf("inter-broker hello names node %d, the certificate node %d", id, v.VerifiedNodeID())
	}
	return &peerConn{Conn: conn, id: id}, nil
}

// peerConn is an inter-broker connection and the node id its dialer
// claimed; it implements kafkaproto.PeerConn.
type peerConn struct {
	net.Conn
	id int32
}

func (c *peerConn) PeerNodeID() int32 { return c.id }

type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives a connection to whoever Accepts; after Close it is closed.
func (l *connListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// protoHTTP is the first byte of a forwarded HTTP connection on the raft port.
const protoHTTP = 'H'

// handoffs runs the goroutines that pass connections from the inter-node
// port's mux (whose handlers must return at once) to the listeners above:
// reading an inter-broker hello, waiting for the HTTP server to accept.
// close stops them: it closes the connections they still hold and waits.
type handoffs struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup
}

func newHandoffs() *handoffs {
	ctx, cancel := context.WithCancel(context.Background())
	return &handoffs{ctx: ctx, cancel: cancel}
}

// run calls fn(c) on a goroutine of its own; after close, c is closed.
func (h *handoffs) run(c net.Conn, fn func(net.Conn)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		c.Close()
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// Until fn returns (the connection handed on, or refused), close
		// owns c: it closes it, which ends a hello still being read.
		stop := context.AfterFunc(h.ctx, func() { c.Close() })
		defer stop()
		fn(c)
	}()
}

// close ends the hand-offs in progress and waits for their goroutines
// (the listeners they hand to must be closed, so hand returns).
func (h *handoffs) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
