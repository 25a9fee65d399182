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

// WriteProblem writes err as the API's problem+json answer, from the same
// error table and with the same headers as every endpoint, for handlers
// that wrap the API outside this package (the server's group proxy). It
// logs nothing.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	WriteProblemLog(w, r, err, slog.New(slog.DiscardHandler))
}

// WriteProblemLog writes err as an RFC 9457 problem: the error table picks
// status and type; the detail is the error text. 5xx details are logged on
// log with the request id (RequestIDFrom).
func WriteProblemLog(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client left; nobody reads the answer
	}
	k := KindOf(err)
	p := NewProblem(err)
	p.Instance, p.RequestID = r.URL.Path, RequestIDFrom(r.Context())
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
		log.LogAttrs(r.Context(), level, "request failed",
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

// retryAfter is the Retry-After of a 429: a RetryAfterError's wait in whole
// seconds (at least 1), else 1.
func retryAfter(err error) string {
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After > time.Second {
		return strconv.FormatInt(int64((ra.After+time.Second-1)/time.Second), 10)
	}
	return "1"
}

func levelFor(status int) slog.Level {
	if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusNotImplemented {
		return slog.LevelError
	}
	return slog.LevelWarn
}

func slogString(k, v string) slog.Attr { return slog.String(k, v) }

// RequestIDHeader carries the request id both ways.
const RequestIDHeader = "X-Request-ID"

type requestIDKey struct{}

// WithRequestID is ctx carrying the request's id (RequestIDHeader), which
// problem answers name.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom is the request id WithRequestID put in ctx ("" for none).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
