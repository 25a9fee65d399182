package server

import (
	"net"
	"sync"
)

// Inter-broker Kafka traffic (replication fetches) arrives on the raft port:
// the port mux hands each such connection to a connListener, which the
// Kafka listener serves like any other net.Listener. So brokers reach each
// other on the address they already use for metadata, not on the Kafka
// address they advertise to clients.

// protoKafka is the first byte of an inter-broker Kafka connection on the
// raft port.
const protoKafka = 'K'

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
