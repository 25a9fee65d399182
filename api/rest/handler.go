package rest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/api"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBodyBytes    = 16 << 20
	DefaultBodyReadTimeout = 30 * time.Second
	DefaultMaxWait         = 60 * time.Second
	DefaultHeartbeat       = 15 * time.Second
)

// Options configures NewHandler. The zero value works.
type Options struct {
	// Logger receives the access log and errors; nil discards.
	Logger *slog.Logger
	// Registerer receives the api metrics (request durations per route and
	// status, produced/consumed records and bytes per topic); nil: not registered.
	Registerer prometheus.Registerer
	// Metrics is served at /metrics. Nil: promhttp over Registerer when it is
	// also a prometheus.Gatherer (a *prometheus.Registry), else 404.
	Metrics http.Handler
	// UI is mounted at /ui/ (it sees the full path); / redirects there. Nil: 404.
	UI http.Handler
	// MaxBodyBytes limits request bodies (413 above); default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Limits bound what hostile or careless clients can make this node hold.
	Limits Limits
	// ClientAddr names the client a request's per-client limits count
	// under; "" counts it only node-wide (e.g. requests another node
	// forwards). Default: the host of the connection's remote address.
	ClientAddr func(*http.Request) string
	// BodyReadTimeout bounds reading one request body; default DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MaxWait caps consume wait_ms; default DefaultMaxWait.
	MaxWait time.Duration
	// Heartbeat is the SSE idle comment interval; default DefaultHeartbeat.
	Heartbeat time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.Limits = o.Limits.withDefaults()
	if o.ClientAddr == nil {
		o.ClientAddr = remoteHost
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		if g, ok := o.Registerer.(prometheus.Gatherer); ok {
			o.Metrics = promhttp.HandlerFor(g, promhttp.HandlerOpts{})
		}
	}
	return o
}

// LoadSpec parses and validates the embedded openapi.yaml.
func LoadSpec() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(runnel.OpenAPISpec)
	if err != nil {
		return nil, fmt.Errorf("api: load openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("api: validate openapi.yaml: %w", err)
	}
	return doc, nil
}

// NewSpecRouter returns a kin-openapi router over the embedded spec, for
// request and response validation (tests use it too).
func NewSpecRouter() (*openapi3.T, routers.Router, error) {
	doc, err := LoadSpec()
	if err != nil {
		return nil, nil, err
	}
	// Routes match request paths as they are: the spec's servers entry
	// ("/", the node itself) is for clients, not a prefix to strip.
	routed := *doc
	routed.Servers = nil
	// Authentication is the auth middleware's (validation's
	// AuthenticationFunc accepts anything). kin-openapi's security check
	// would still read every request body into memory to hand each
	// AuthenticationFunc a fresh copy: a second copy of every produce
	// body (issue 17). Routes carry no security requirements, so it
	// reads none.
	routed.Security = nil
	r, err := legacy.NewRouter(&routed)
	if err != nil {
		return nil, nil, fmt.Errorf("api: openapi router: %w", err)
	}
	return doc, r, nil
}

// handler holds what every resource needs. Immutable after NewHandler, so safe
// for concurrent use.
type handler struct {
	b       api.Backend
	opts    Options
	log     *slog.Logger
	doc     *openapi3.T
	spec    routers.Router
	metrics *metrics
	docs    []byte // rendered /docs page

	// Node-wide limits (each safe for concurrent use).
	mem       *byteBudget
	longPolls *slots
	streams   *slots
	idem      *inflightKeys // Idempotency-Keys being served

	outBufs outBufPool // large consume answers' output buffers
}

// NewHandler returns the HTTP API over b: every route of openapi.yaml, the
// metrics handler, the UI under /ui/. The returned handler is safe for
// concurrent use and owns no goroutines beyond those of in-flight requests
// (each SSE stream's readers stop when its request ends).
func NewHandler(b api.Backend, opts Options) (http.Handler, error) {
	if b == nil {
		return nil, errors.New("api: nil Backend")
	}
	opts = opts.withDefaults()
	doc, spec, err := NewSpecRouter()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	docs, err := renderDocs(doc)
	if err != nil {
		return nil, err
	}
	l := opts.Limits
	h := &handler{b: b, opts: opts, log: opts.Logger, doc: doc, spec: spec, metrics: m, docs: docs,
		mem:       newByteBudget(l.MemoryBudget),
		longPolls: newSlots("long polls", l.MaxLongPolls, l.MaxLongPollsPerClient),
		streams:   newSlots("streams", l.MaxStreams, l.MaxStreamsPerClient),
		idem:      newInflightKeys()}
	return h.routes(), nil
}

func (h *handler) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(h.requestID, h.accessLog, h.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		h.problem(w, r, fmt.Errorf("%w: %s", api.ErrNotFound, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		h.problem(w, r, fmt.Errorf("%w: %s %s", api.ErrMethodNotAllowed, r.Method, r.URL.Path))
	})
	r.Get("/livez", h.livez)
	r.Get("/readyz", h.readyz)
	r.Get("/openapi.yaml", h.openapi)
	r.Get("/docs", h.docsPage)
	if h.opts.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", h.opts.Metrics)
	}
	if h.opts.UI != nil {
		r.Handle("/ui/*", h.opts.UI)
		r.Get("/ui", redirect("/ui/"))
		r.Get("/", redirect("/ui/"))
	}
	r.Route("/v1", func(r chi.Router) {
		r.Use(h.readBody, h.writesNeedReady, h.validate)
		r.Mount("/cluster", clusterResource{h}.Routes())
		r.Mount("/brokers", brokersResource{h}.Routes())
		r.Mount("/topics", topicsResource{h}.Routes())
		r.Mount("/kafka", kafkaResource{h}.Routes())
		r.Mount("/stats", statsResource{h}.Routes())
		r.Mount("/groups", groupsResource{h}.Routes())
		r.Mount("/users", usersResource{h}.Routes())
		r.Mount("/acls", aclsResource{h}.Routes())
		r.Mount("/transactions", transactionsResource{h}.Routes())
		r.Mount("/tokens", tokensResource{h}.Routes())
		r.Mount("/quotas", quotasResource{h}.Routes())
		r.Mount("/session", sessionResource{h}.Routes())
	})
	return r
}

func redirect(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusFound)
	}
}

func (h *handler) livez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	err := h.b.Ready()
	if sb, ok := h.b.(api.StorageBackend); ok && err == nil {
		err = sb.StorageError()
	}
	if err != nil {
		h.problem(w, r, readyErr(err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ready\n")
}

// readyErr makes a Ready error map to 503 whatever the backend wrapped.
func readyErr(err error) error {
	if errors.Is(err, api.ErrNotReady) {
		return err
	}
	return fmt.Errorf("%w: %v", api.ErrNotReady, err)
}

func (h *handler) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(runnel.OpenAPISpec)
}

func (h *handler) docsPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(h.docs)
}
