package quota

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
)

// Client quotas on the HTTP door: a client is the principal's user name
// (ANONYMOUS without authentication); the produce endpoint's body counts
// against producer_byte_rate, the consume endpoints' responses against
// consumer_byte_rate, every request's time against request_percentage.

// httpQuotaKind is the byte quota an HTTP request counts against: the
// produce endpoint's body, the consume endpoints' responses.
func httpQuotaKind(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/topics/") && strings.HasSuffix(p, "/records"):
		return ProducerByteRate
	case r.Method == http.MethodGet && (strings.HasSuffix(p, "/records") || strings.HasSuffix(p, "/records/stream")):
		return ConsumerByteRate
	}
	return ""
}

// maxHTTPQuotaDelay: a request throttled for up to this long is held
// (before its body is read) and then served, so a client sending one
// request after another gets its quota exactly; a longer throttle is
// answered 429 with Retry-After.
const maxHTTPQuotaDelay = time.Second

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// HTTP enforces client quotas on HTTP requests; it goes after
// authentication (the principal is known). A request forwarded by another
// node (forwarded) was metered there. Over its quota by up to
// maxHTTPQuotaDelay, a request is held and then served; over it by more,
// it is answered 429 quota-exceeded with Retry-After.
func (n *Node) HTTP(h http.Handler, forwarded func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := n.Table()
		if t.Empty() || forwarded(r) {
			h.ServeHTTP(w, r)
			return
		}
		user, kind := User(api.PrincipalFrom(r.Context())), httpQuotaKind(r)
		kinds := []string{RequestPercentage}
		if kind != "" {
			kinds = append(kinds, kind)
		}
		if d := n.Throttled(t, user, "", kinds...); d > maxHTTPQuotaDelay {
			api.WriteProblem(w, r, &api.RetryAfterError{After: d,
				Err: fmt.Errorf("%w: %s is over its %s quota for %v more", api.ErrQuotaExceeded, user, strings.Join(kinds, "/"), d.Round(time.Millisecond))})
			return
		} else if d > 0 && !sleepCtx(r.Context(), d) {
			return // the client left
		}
		start := time.Now()
		var body *countingBody
		if r.Body != nil && kind == ProducerByteRate {
			body = &countingBody{ReadCloser: r.Body}
			r.Body = body
		}
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		produced, fetched := 0, 0
		if body != nil {
			produced = int(body.n)
		}
		if kind == ConsumerByteRate {
			fetched = int(cw.n)
		}
		n.Charge(t, user, "", produced, fetched, time.Since(start))
	})
}

// countingBody counts the request body bytes a handler read.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// countingWriter counts the response body bytes; Unwrap keeps
// http.ResponseController (flushes of streams, deadlines) working.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
