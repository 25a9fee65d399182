package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runnel/runnel/internal/warnlimit"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Defaults for zero Options fields.
const (
	DefaultMaxRequestSize = 100 << 20 // Kafka's socket.request.max.bytes
	DefaultMaxConnections = 1000
	// DefaultMaxConnectionsPerIP keeps one client host from taking every
	// client slot (Kafka's max.connections.per.ip, unlimited there).
	DefaultMaxConnectionsPerIP = 500
	// DefaultMaxPeerConnections is the inter-broker door's own budget: a
	// follower holds one connection per leader broker.
	DefaultMaxPeerConnections = 256
	DefaultIdleTimeout        = 10 * time.Minute // Kafka's connections.max.idle.ms

	// limitWarnEvery rate-limits the WARN line for refused connections and
	// requests: a client retrying in a loop must not flood the log.
	limitWarnEvery = 10 * time.Second
	// DefaultMaxAdminTopics bounds the topics of one CreateTopics or
	// CreatePartitions request (each is a metadata proposal).
	DefaultMaxAdminTopics = 1000

	// smallRequestMax bounds every request but Produce: none of them needs
	// more, and it keeps what a decoder may allocate for a hostile frame
	// small (kmsg allocates at most one element per remaining byte).
	smallRequestMax = 1 << 20
)

// Options configures a Server. The zero value is usable.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()
	// MaxRequestSize bounds a request frame (Produce); other requests are
	// bounded by min(MaxRequestSize, 1 MiB). 0: DefaultMaxRequestSize.
	MaxRequestSize int32
	// MaxConnections caps concurrently open client connections (Serve);
	// connections beyond it are closed at once. 0: DefaultMaxConnections.
	MaxConnections int
	// MaxConnectionsPerIP caps the client connections from one IP
	// address. 0: DefaultMaxConnectionsPerIP.
	MaxConnectionsPerIP int
	// AdmitClient, when set, is asked for each new client connection with
	// its remote IP; false closes the connection at once (the server's
	// connection creation rate per address, Kafka's KIP-612, which also
	// logs the refusals). nil admits all.
	AdmitClient func(ip string) bool
	// MaxPeerConnections caps the inter-broker connections (ServePeers),
	// counted apart from the clients' so that clients holding every
	// client slot cannot keep a follower from replicating.
	// 0: DefaultMaxPeerConnections.
	MaxPeerConnections int
	// IdleTimeout closes a connection that sends no request for this
	// long; it also bounds reading one request and writing one response.
	// 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// AutoCreateTopics lets Metadata requests with AllowAutoTopicCreation
	// create missing topics with the broker's default partitions and
	// replication factor. Off by default.
	AutoCreateTopics bool
	// MaxAdminTopics bounds the topics of one CreateTopics or
	// CreatePartitions request; a request naming more is refused whole
	// (INVALID_REQUEST for each topic). 0: DefaultMaxAdminTopics.
	MaxAdminTopics int
	// RequireAuth: a client connection must authenticate (SASL, or a
	// verified TLS client certificate) before any request but ApiVersions,
	// SaslHandshake and SaslAuthenticate; see sasl.go.
	RequireAuth bool
	// MaxReplicaSessionPartitions bounds a follower's fetch session
	// (fetchsession.go); the server sets it to the most partitions a
	// broker hosts. 0: DefaultMaxReplicaSessionPartitions.
	MaxReplicaSessionPartitions int
	// MaxReauth is Kafka's connections.max.reauth.ms (KIP-368): when > 0 a
	// SASL login lasts this long (SaslAuthenticate v1+ says so in
	// SessionLifetimeMs), the client may log in again on the same
	// connection as the same principal with the same mechanism, and a
	// request other than SaslHandshake/SaslAuthenticate after the session
	// ended closes the connection. 0 (the default, as Kafka): no
	// re-authentication, a login lasts as long as its connection.
	MaxReauth time.Duration
	// now is the clock sessions expire by; tests set it. nil: time.Now.
	now func() time.Time
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("kafkaproto: server closed")

// Server is a Kafka protocol listener. Its methods are safe for concurrent
// use. It owns one goroutine per open connection; Close stops and waits for
// them.
type Server struct {
	broker   Broker
	opts     Options
	log      *slog.Logger
	handlers map[int16]kapi.Handler
	slots    chan struct{}      // one token per open client connection
	peers    chan struct{}      // one token per open inter-broker connection
	refused  *warnlimit.Limiter // refused connections and replica requests
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // Serve calls and connection goroutines

	sessionIDs atomic.Int32 // source of fetch session ids

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]*activity
	perIP     map[string]int // open client connections by remote IP
}

// NewServer returns a listener serving broker.
func NewServer(broker Broker, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRequestSize <= 0 {
		opts.MaxRequestSize = DefaultMaxRequestSize
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxConnectionsPerIP <= 0 {
		opts.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if opts.MaxPeerConnections <= 0 {
		opts.MaxPeerConnections = DefaultMaxPeerConnections
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxAdminTopics <= 0 {
		opts.MaxAdminTopics = DefaultMaxAdminTopics
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		broker:    broker,
		opts:      opts,
		log:       opts.Logger,
		handlers:  handlerTable(),
		slots:     make(chan struct{}, opts.MaxConnections),
		peers:     make(chan struct{}, opts.MaxPeerConnections),
		refused:   warnlimit.New(opts.Logger, limitWarnEvery),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]*activity),
		perIP:     make(map[string]int),
	}
}

// door is how a connection came in: the public client port, or the
// inter-broker port that only authenticated peers reach.
type door int

const (
	clientDoor door = iota
	peerDoor
)

// PeerConn is what a connection handed to ServePeers may implement: the
// node id the dialing broker claimed when it connected. A replica fetch on
// such a connection must name that id. Without it, any replica id of the
// partition is accepted on the peer door.
type PeerConn interface {
	net.Conn
	PeerNodeID() int32
}

// Serve accepts client connections on ln until ctx is done or Close is
// called, and then closes ln. Connections it accepted keep running until
// Close. It returns nil when ctx ended it, ErrServerClosed after Close, or
// the accept error. Replica fetches (ReplicaID >= 0) are refused on these
// connections.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, clientDoor)
}

// ServePeers is Serve for the inter-broker door: ln must yield only
// connections from authenticated brokers (the server's raft-port mux). They
// have their own connection budget and may send replica fetches.
func (s *Server) ServePeers(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, peerDoor)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, d door) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case s.ctx.Err() != nil:
				return ErrServerClosed
			case isTemporary(err):
				// Out of file descriptors or an aborted handshake:
				// back off and keep serving, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("kafka accept failed; retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				case <-s.ctx.Done():
				}
				continue
			}
			return fmt.Errorf("kafkaproto: accept: %w", err)
		}
		backoff = 0
		s.startConn(conn, d)
	}
}

// isTemporary reports accept errors that do not mean the listener is gone.
func isTemporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED)
}

// startConn registers conn and starts its goroutine, or closes it when its
// door's connection cap (or, for a client, its address's cap) is reached or
// the server is closed.
func (s *Server) startConn(conn net.Conn, d door) {
	if d == clientDoor && s.opts.AdmitClient != nil && !s.opts.AdmitClient(remoteIP(conn)) {
		conn.Close()
		return
	}
	slots, limit := s.slots, s.opts.MaxConnections
	if d == peerDoor {
		slots, limit = s.peers, s.opts.MaxPeerConnections
	}
	select {
	case slots <- struct{}{}:
	default:
		s.refused.Warn("connection limit reached, closing connection",
			"remote", conn.RemoteAddr().String(), "max", limit, "inter_broker", d == peerDoor)
		conn.Close()
		return
	}
	ip := ""
	if d == clientDoor {
		ip = remoteIP(conn)
	}
	s.mu.Lock()
	if s.closed || (ip != "" && s.perIP[ip] >= s.opts.MaxConnectionsPerIP) {
		closed := s.closed
		s.mu.Unlock()
		<-slots
		if !closed {
			s.refused.Warn("connection limit per address reached, closing connection",
				"remote", conn.RemoteAddr().String(), "max", s.opts.MaxConnectionsPerIP)
		}
		conn.Close()
		return
	}
	if ip != "" {
		s.perIP[ip]++
	}
	act := &activity{}
	act.set(phaseReading, -1)
	s.conns[conn] = act
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-slots }()
		defer func() {
			s.mu.Lock()
			delete(s.conns, conn)
			if ip != "" {
				if s.perIP[ip]--; s.perIP[ip] <= 0 {
					delete(s.perIP, ip)
				}
			}
			s.mu.Unlock()
			conn.Close()
		}()
		s.serveConn(conn, d, act)
	}()
}

// remoteIP is the IP part of conn's remote address ("" when it has none).
func remoteIP(conn net.Conn) string {
	addr := conn.RemoteAddr()
	if addr == nil {
		return ""
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return host
}

// Close stops every listener and connection and waits for their goroutines.
// Each closeReportAfter of the wait is logged with what the connections
// are doing (activity.go), and a logged wait's end with the time it took.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.cancel()
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	// Each second of the wait is logged: what the connections do changes
	// as they end (at 300,000 partitions the first report named two
	// replica Fetches, and the wait went on a second after they were
	// written, unnamed).
	tick := time.NewTicker(closeReportAfter)
	defer tick.Stop()
	for reported := false; ; {
		select {
		case <-done:
			if reported {
				s.log.Info("kafka listener closed", "waited", time.Since(start))
			}
			return nil
		case <-tick.C:
			reported = true
			s.mu.Lock()
			acts := make([]*activity, 0, len(s.conns))
			for _, a := range s.conns {
				acts = append(acts, a)
			}
			s.mu.Unlock()
			s.log.Info("kafka listener closing: waiting for connections", "connections", len(acts),
				"busy", describeBusy(acts, time.Now()), "waited", time.Since(start))
		}
	}
}
