// What a slow stop of the HTTP servers waits for: the requests still
// running and the connections by state, logged each second of the wait
// after the grace (stopHTTP), and the deadlines that end a request's I/O
// once its context ends. The HTTP step of a 300,000-partition node's exit
// once took 3.4 s with nothing in the log naming what it waited for
// (issue 19).

package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runnel/runnel/internal/waitlog"
)

// httpWaits tracks the HTTP server's requests in flight and its
// connections' states. Both are sync.Maps: every request writes and
// deletes its own key (and, on HTTP/1, its connection's), so requests on
// different cores do not share a lock.
type httpWaits struct {
	requests sync.Map // *http.Request (the outer one) → time.Time it began
	conns    sync.Map // net.Conn → connSince
}

// connSince is a connection's state and when it entered it.
type connSince struct {
	state http.ConnState
	since time.Time
}

// wrap records each request h serves while it runs. When the request's
// context ends while it runs (the stop's grace ended every request's
// context, or the client went away), reading its body fails at once and
// writing its answer a grace later: a context ends a long poll, but not a
// read of a body the client holds half-sent, nor a write to a client that
// reads no more, and one such client held a node's stop for the whole
// shutdown timeout (20 s).
func (w *httpWaits) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.requests.Store(r, time.Now())
		defer w.requests.Delete(r)
		rc := http.NewResponseController(rw)
		cut := context.AfterFunc(r.Context(), func() {
			now := time.Now()
			_ = rc.SetReadDeadline(now) // not every connection supports deadlines
			_ = rc.SetWriteDeadline(now.Add(httpShutdownGrace))
		})
		defer cut()
		h.ServeHTTP(rw, r)
	})
}

// connState is the http.Server's ConnState hook.
func (w *httpWaits) connState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		w.conns.Delete(c)
		return
	}
	w.conns.Store(c, connSince{st, time.Now()})
}

// describe summarizes what is in flight: the requests grouped by method and
// path (no query: it may carry a secret), e.g. "GET /v1/topics/t: 2 (oldest
// 3.1s)", most first, and the connections by state, e.g. "active: 2 (oldest
// 1.5s); idle: 1 (oldest 0.2s)", the age of the state they are in.
func (w *httpWaits) describe(now time.Time) (requests, conns string) {
	var rg, cg waitlog.Groups
	w.requests.Range(func(k, v any) bool {
		r := k.(*http.Request)
		rg.Add(r.Method+" "+r.URL.Path, now.Sub(v.(time.Time)))
		return true
	})
	w.conns.Range(func(_, v any) bool {
		c := v.(connSince)
		cg.Add(c.state.String(), now.Sub(c.since))
		return true
	})
	return rg.String(), cg.String()
}
