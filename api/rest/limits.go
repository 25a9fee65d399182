package rest

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runnel/runnel/api"
)

// Limits bound what one node holds for HTTP clients, so no client (or few)
// can exhaust its memory or its goroutines. Zero fields take the defaults.
//
// Memory: request bodies and response buffers in flight take bytes from one
// node-wide budget (Kafka's queued.max.request.bytes, for both directions):
// a body before it is read (by its Content-Length, or as it arrives), a
// consume its max_bytes times the cost of rendering records as JSON
// (clamped to what is free), an SSE stream its partitions' read-ahead.
// When the budget is spent the request is answered 503 overloaded with
// Retry-After, before anything is allocated for it.
//
// Concurrency: long polls (consume with wait_ms), SSE streams and
// connections are counted per node and per client address; over either
// count a request is answered 429 too-many-requests with Retry-After.
type Limits struct {
	// MaxProduceRecords caps the records of one produce request (413
	// too-many-records above). Decoding keeps a fixed-size entry per record
	// whatever its bytes, so the count, not only the body size, bounds what
	// a request costs.
	MaxProduceRecords int
	// MemoryBudget is the bytes of request bodies and response buffers all
	// in-flight HTTP requests may hold together.
	MemoryBudget int64
	// MaxLongPolls and MaxLongPollsPerClient bound concurrent waiting
	// consumes (wait_ms > 0) and group member polls.
	MaxLongPolls, MaxLongPollsPerClient int
	// MaxStreams and MaxStreamsPerClient bound concurrent SSE streams.
	MaxStreams, MaxStreamsPerClient int
	// MaxConnections and MaxConnectionsPerClient bound open HTTP
	// connections (LimitListener); more are answered and closed at once.
	MaxConnections, MaxConnectionsPerClient int
	// MaxZstdWindow caps the window a zstd-compressed request body may
	// declare (its decoder holds that much; 413 above). gzip needs no cap:
	// its window is 32 KiB.
	MaxZstdWindow int64
	// WriteTimeout bounds writing one consume response: a client that does
	// not read is dropped and what its response held is freed. SSE streams
	// are bounded per write instead (a stream is long by design).
	WriteTimeout time.Duration
}

// DefaultLimits are the limits of a node started without flags.
var DefaultLimits = Limits{
	MaxProduceRecords:       api.DefaultMaxProduceRecords,
	MemoryBudget:            512 << 20,
	MaxLongPolls:            1024,
	MaxLongPollsPerClient:   256,
	MaxStreams:              256,
	MaxStreamsPerClient:     64,
	MaxConnections:          4096,
	MaxConnectionsPerClient: 1024,
	WriteTimeout:            60 * time.Second,
	MaxZstdWindow:           8 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.MaxProduceRecords, d.MaxProduceRecords)
	pick(&l.MaxLongPolls, d.MaxLongPolls)
	pick(&l.MaxLongPollsPerClient, d.MaxLongPollsPerClient)
	pick(&l.MaxStreams, d.MaxStreams)
	pick(&l.MaxStreamsPerClient, d.MaxStreamsPerClient)
	pick(&l.MaxConnections, d.MaxConnections)
	pick(&l.MaxConnectionsPerClient, d.MaxConnectionsPerClient)
	if l.MemoryBudget <= 0 {
		l.MemoryBudget = d.MemoryBudget
	}
	if l.MaxZstdWindow <= 0 {
		l.MaxZstdWindow = d.MaxZstdWindow
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	return l
}

// byteBudget is a node-wide semaphore of bytes; it never blocks (a request
// that does not fit is refused, not queued). Safe for concurrent use.
type byteBudget struct {
	mu   sync.Mutex
	free int64 // guarded by mu
	size int64
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{free: size, size: size} }

// take reserves n bytes, or nothing and an ErrOverloaded.
func (b *byteBudget) take(n int64, what string) error {
	if b.takeUpTo(n, n) == 0 && n > 0 {
		return fmt.Errorf("%w: %s needs %d bytes, the node's HTTP memory budget (%d) is in use", api.ErrOverloaded, what, n, b.size)
	}
	return nil
}

// takeUpTo reserves as much of want as is free, or nothing when less than
// least is; it returns what it reserved.
func (b *byteBudget) takeUpTo(want, least int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(want, b.free)
	if n < least || n <= 0 {
		return 0
	}
	b.free -= n
	return n
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
}

// slots counts things of one kind held at once, per node and per client
// address. Safe for concurrent use.
type slots struct {
	what           string
	max, perClient int
	mu             sync.Mutex
	total          int            // guarded by mu
	byClient       map[string]int // guarded by mu
}

func newSlots(what string, max, perClient int) *slots {
	return &slots{what: what, max: max, perClient: perClient, byClient: map[string]int{}}
}

// take holds one slot for client, or answers ErrTooManyRequests.
func (s *slots) take(client string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total >= s.max {
		return fmt.Errorf("%w: %d %s at once on this node", api.ErrTooManyRequests, s.max, s.what)
	}
	if client != "" && s.byClient[client] >= s.perClient {
		return fmt.Errorf("%w: %d %s at once from %s", api.ErrTooManyRequests, s.perClient, s.what, client)
	}
	s.total++
	if client != "" {
		s.byClient[client]++
	}
	return nil
}

func (s *slots) release(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if client == "" {
		return
	}
	if s.byClient[client]--; s.byClient[client] <= 0 {
		delete(s.byClient, client)
	}
}

// remoteHost is the client address a request's per-client limits count
// under: the host of its connection's remote address.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
