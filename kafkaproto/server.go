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
)

// Defaults for zero Options fields.
const (
	DefaultMaxRequestSize = 100 << 20 // Kafka's socket.request.max.bytes
	DefaultMaxConnections = 1000
	DefaultIdleTimeout    = 10 * time.Minute // Kafka's connections.max.idle.ms

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
	// MaxConnections caps concurrently open connections; connections
	// beyond it are closed at once. 0: DefaultMaxConnections.
	MaxConnections int
	// IdleTimeout closes a connection that sends no request for this
	// long; it also bounds reading one request and writing one response.
	// 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// AutoCreateTopics lets Metadata requests with AllowAutoTopicCreation
	// create missing topics with the broker's default partitions and
	// replication factor. Off by default.
	AutoCreateTopics bool
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
	handlers map[int16]apiHandler
	slots    chan struct{} // one token per open connection
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // Serve calls and connection goroutines

	sessionIDs atomic.Int32 // source of fetch session ids

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
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
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		broker:    broker,
		opts:      opts,
		log:       opts.Logger,
		handlers:  handlerTable(),
		slots:     make(chan struct{}, opts.MaxConnections),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
}

// Serve accepts connections on ln until ctx is done or Close is called, and
// then closes ln. Connections it accepted keep running until Close. It
// returns nil when ctx ended it, ErrServerClosed after Close, or the accept
// error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
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
		s.startConn(conn)
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

// startConn registers conn and starts its goroutine, or closes it when the
// connection cap is reached or the server is closed.
func (s *Server) startConn(conn net.Conn) {
	select {
	case s.slots <- struct{}{}:
	default:
		s.log.Warn("connection limit reached, closing connection",
			"remote", conn.RemoteAddr().String(), "max", s.opts.MaxConnections)
		conn.Close()
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.slots
		conn.Close()
		return
	}
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		defer func() {
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
			conn.Close()
		}()
		s.serveConn(conn)
	}()
}

// Close stops every listener and connection and waits for their goroutines.
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
	s.wg.Wait()
	return nil
}
