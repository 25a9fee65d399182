package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// writeJSON writes v as a JSON response with status, within WriteTimeout
// (a client that does not read frees what the response holds).
func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	defer h.writeDeadline(w)()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeDeadline bounds the response's writes by WriteTimeout from now; the
// returned func clears it, so no later request on the connection inherits it.
func (h *handler) writeDeadline(w http.ResponseWriter) func() {
	rc := http.NewResponseController(w)
	if rc.SetWriteDeadline(h.opts.Now().Add(h.opts.Limits.WriteTimeout)) != nil {
		return func() {}
	}
	return func() { _ = rc.SetWriteDeadline(time.Time{}) }
}

// problem writes err as an RFC 9457 problem: the error table picks status and
// type; the detail is the error text. 5xx details are logged with the request id.
func (h *handler) problem(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client left; nobody reads the answer
	}
	k := KindOf(err)
	p := newProblem(err)
	p.Instance, p.RequestID = r.URL.Path, requestIDFrom(r.Context())
	if k.Status >= 500 {
		level := levelFor(k.Status)
		if errors.Is(err, ErrNotReady) {
			level = slog.LevelDebug // expected while a node starts or stops; /readyz is polled
		}
		if errors.Is(err, ErrStorage) {
			// The server logs the failing disk once and its recovery
			// attempts; a line per refused request would flood the log.
			level = slog.LevelDebug
		}
		h.log.LogAttrs(r.Context(), level, "request failed",
			slogString("request_id", p.RequestID), slogString("error", err.Error()))
		if k.Status == http.StatusServiceUnavailable || k.Status == http.StatusInsufficientStorage {
			w.Header().Set("Retry-After", "1")
		}
		if k.Status == http.StatusInternalServerError {
			p.Detail = "internal error; see the server log for request " + p.RequestID
		}
	}
	if k.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfter(err))
	}
	body, _ := json.Marshal(p) // Problem always marshals
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(k.Status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteProblem writes err as the API's problem+json answer, from the same
// error table and with the same headers as every endpoint, for handlers
// that wrap the API outside this package (the server's group proxy). It
// logs nothing.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	(&handler{log: slog.New(slog.DiscardHandler)}).problem(w, r, err)
}
