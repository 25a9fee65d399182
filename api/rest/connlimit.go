package rest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/runnel/runnel/api"
)

// ConnLimiter counts open HTTP connections per node and per client address
// (Limits.MaxConnections, MaxConnectionsPerClient) across the listeners it
// wraps. Safe for concurrent use.
type ConnLimiter struct {
	slots *slots
	log   *slog.Logger
	// Admit, when set before Listener, is asked for each new connection
	// with its client address; false answers ErrConnectionRate (429) and
	// closes it. The server sets it to its connection creation rate per
	// address and logs those refusals itself.
	Admit func(host string) bool

	mu      sync.Mutex
	lastLog time.Time // guarded by mu: refusals are logged at most every 10 s
}

// NewConnLimiter returns a limiter for l's connection limits (defaults for
// zero fields); log may be nil.
func NewConnLimiter(l Limits, log *slog.Logger) *ConnLimiter {
	l = l.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ConnLimiter{slots: newSlots("connections", l.MaxConnections, l.MaxConnectionsPerClient), log: log}
}

// Listener wraps ln: a connection over a limit is closed at once, after a
// 429 problem+json answer when plainHTTP (a TLS listener's raw connection
// cannot be answered before its handshake, so it is only closed).
func (cl *ConnLimiter) Listener(ln net.Listener, plainHTTP bool) net.Listener {
	return &limitListener{Listener: ln, cl: cl, answer: plainHTTP}
}

type limitListener struct {
	net.Listener
	cl     *ConnLimiter
	answer bool
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := connHost(c.RemoteAddr())
		if l.cl.Admit != nil && !l.cl.Admit(host) {
			l.cl.answer(c, fmt.Errorf("%w from %s", api.ErrConnectionRate, host), l.answer)
			continue
		}
		if err := l.cl.slots.take(host); err != nil {
			l.cl.refuse(c, err, l.answer)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.cl.slots.release(host) }}, nil
	}
}

func connHost(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refuse answers and closes an over-limit connection without blocking the
// accept loop for long (a fresh socket's send buffer takes the answer).
func (cl *ConnLimiter) refuse(c net.Conn, err error, answer bool) {
	cl.answer(c, err, answer)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if now := time.Now(); now.Sub(cl.lastLog) >= 10*time.Second {
		cl.lastLog = now
		cl.log.Warn("refusing HTTP connections", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// answer writes err's problem (when answer) and closes c.
func (cl *ConnLimiter) answer(c net.Conn, err error, answer bool) {
	if answer {
		k := api.KindOf(err)
		body, _ := json.Marshal(api.NewProblem(err))
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte("HTTP/1.1 " + strconv.Itoa(k.Status) + " Too Many Requests\r\n" +
			"Content-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)))
	}
	_ = c.Close()
}

// limitedConn gives its slot back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
