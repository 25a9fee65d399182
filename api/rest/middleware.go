package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nuid"
	"github.com/runnel/runnel/api"
)

type ctxKey int

const (
	bodyKey ctxKey = iota // []byte: the body readBody read
)

// requestID keeps a sane incoming X-Request-ID or makes one with nuid, stores it
// in the context and echoes it in the response.
func (h *handler) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(api.RequestIDHeader)
		if !saneID(id) {
			id = nuid.Next()
		}
		w.Header().Set(api.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(api.WithRequestID(r.Context(), id)))
	})
}

func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// statusWriter records the status and size of a response. It passes Flush
// through and unwraps for http.ResponseController (SSE needs both).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.bytes += int64(n)
	return n, err
}

func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// accessLog logs one line per request (at debug) and observes the duration histogram
// labelled with the chi route pattern (not the raw path: bounded cardinality).
func (h *handler) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := h.opts.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := h.opts.Now().Sub(start)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		h.metrics.observe(route, r.Method, sw.status, d)
		// At debug (--log-level debug): one line per request drowned
		// everything else at info; /metrics has the counts and durations.
		h.log.LogAttrs(r.Context(), slog.LevelDebug, "http",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("route", route), slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes), slog.Duration("duration", d),
			slog.String("request_id", api.RequestIDFrom(r.Context())))
	})
}

// recoverer turns a handler panic into a logged 500 (when nothing was written
// yet). http.ErrAbortHandler is re-raised: it is how a handler aborts on purpose.
func (h *handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.LogAttrs(r.Context(), slog.LevelError, "handler panic",
				slog.String("request_id", api.RequestIDFrom(r.Context())),
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
				return
			}
			h.problem(w, r, fmt.Errorf("api: panic: %v", v))
		}()
		next.ServeHTTP(w, r)
	})
}

// readBody reads a request body whole, within MaxBodyBytes (413 above) and
// BodyReadTimeout, and replaces it with an in-memory reader, so validation and
// the handler see the same bytes and no handler blocks on a slow client.
// The body's bytes are taken from the node's memory budget (by its
// Content-Length before reading, else as they arrive) until the request
// is answered: 503 overloaded when the budget is in use.
func (h *handler) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > h.opts.MaxBodyBytes {
			h.problem(w, r, fmt.Errorf("%w: %d bytes, the limit is %d", api.ErrBodyTooLarge, r.ContentLength, h.opts.MaxBodyBytes))
			return
		}
		held := &budgetReader{b: h.mem}
		defer func() { h.mem.give(held.held) }()
		if r.ContentLength > 0 {
			if err := h.mem.take(r.ContentLength, "the request body"); err != nil {
				w.Header().Set("Connection", "close") // the body stays unread
				h.problem(w, r, err)
				return
			}
			held.held, held.prepaid = r.ContentLength, r.ContentLength
		}
		held.r = r.Body
		dec, decMem, err := bodyDecoder(r, h.opts.Limits.MaxZstdWindow)
		if err != nil {
			w.Header().Set("Connection", "close") // the body stays unread
			h.problem(w, r, err)
			return
		}
		if dec != nil {
			// Decompressed bytes go through the budget and MaxBodyBytes
			// as they arrive, the decompressor's memory first.
			if err := h.mem.take(decMem, "decompressing the body"); err != nil {
				w.Header().Set("Connection", "close")
				h.problem(w, r, err)
				return
			}
			defer h.mem.give(decMem)
			defer dec.Close()
			held.r = dec
		}
		body, err := h.slurp(w, r, held, r.ContentLength)
		if err != nil {
			h.problem(w, r, err)
			return
		}
		if dec != nil {
			r.Header.Del("Content-Encoding")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyKey, body)))
	})
}

// requestBody returns the body readBody read, without copying it again.
func requestBody(r *http.Request) ([]byte, error) {
	if body, ok := r.Context().Value(bodyKey).([]byte); ok {
		return body, nil
	}
	return io.ReadAll(r.Body)
}

// budgetReader takes what it reads beyond prepaid from the memory budget.
type budgetReader struct {
	r       io.Reader
	b       *byteBudget
	prepaid int64 // taken before reading (the Content-Length)
	read    int64
	held    int64 // taken in all, given back when the request ends
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.read += int64(n)
	if over := br.read - br.held; over > 0 {
		if terr := br.b.take(over, "the request body"); terr != nil {
			return n, terr
		}
		br.held += over
	}
	return n, err
}

// slurp reads body whole; size, when known (> 0), sizes the buffer once
// (io.ReadAll would grow it by doubling: up to 3x the body allocated).
func (h *handler) slurp(w http.ResponseWriter, r *http.Request, body io.Reader, size int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	// Not every ResponseWriter supports deadlines (httptest's recorder does
	// not); then the server's own ReadTimeout is the only bound.
	deadline := rc.SetReadDeadline(h.opts.Now().Add(h.opts.BodyReadTimeout)) == nil
	if deadline && r.Context().Err() != nil {
		// The request ended before its body was read (a stopping server
		// ended every request's context and cut the reads in flight): the
		// deadline just set would have overwritten that cut, and a client
		// holding its body half-sent would hold the stop.
		_ = rc.SetReadDeadline(h.opts.Now())
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size) + bytes.MinRead) // ReadFrom wants MinRead free to not grow
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, io.NopCloser(body), h.opts.MaxBodyBytes))
	data := buf.Bytes()
	if err == nil {
		if deadline {
			// A deadline left behind would cancel the request context later
			// (net/http's background read fails), so clear it.
			_ = rc.SetReadDeadline(time.Time{})
		}
		return data, nil
	}
	// On failure the expired deadline stays and the connection is closed
	// after the reply: net/http must not wait for the rest of the body.
	w.Header().Set("Connection", "close")
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: the limit is %d bytes", api.ErrBodyTooLarge, mbe.Limit)
	}
	if errors.Is(err, api.ErrOverloaded) || errors.Is(err, api.ErrBodyTooLarge) {
		return nil, err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil, fmt.Errorf("%w: %v", api.ErrBodyTimeout, h.opts.BodyReadTimeout)
	}
	return nil, fmt.Errorf("%w: reading the body: %v", api.ErrInvalidRequest, err)
}

// writesNeedReady answers 503 to writes while the backend is not ready.
func (h *handler) writesNeedReady(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if err := h.b.Ready(); err != nil {
				h.problem(w, r, readyErr(err))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
