package access

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/runnel/runnel/api"
)

// The audit log (issue 15), HTTP door: every request that changes the
// cluster (topics and their configs, leader elections, reassignments,
// controllers, users, tokens, ACLs, quotas, group deletions and offset
// resets) is logged at INFO with audit=true, the principal, the client
// address, door=http, the method and path (never a body: passwords and
// tokens travel there) and the answer's status, refusals included. The
// Kafka door logs the same way (kafkaproto/audit.go). A request another
// node forwarded was logged there.

// AuditedHTTP reports whether a request changes the cluster. Produce,
// offset commits and group membership are data, not administration.
func AuditedHTTP(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/v1/") {
		return false
	}
	switch {
	case strings.HasPrefix(p, "/v1/topics/") && strings.HasSuffix(p, "/records"):
		return false // produce
	case strings.HasPrefix(p, "/v1/groups/") && (strings.Contains(p, "/members") || strings.HasSuffix(p, "/offsets")):
		return false // membership and commits; /offsets/reset is audited
	}
	return true
}

// WithAudit logs the audited requests once they are answered; those
// forwarded (forwarded reports them) were logged on the node that
// forwarded them.
func (a *Access) WithAudit(h http.Handler, forwarded func(*http.Request) bool) http.Handler {
	log := a.cfg.Logger.With("component", "http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !AuditedHTTP(r) || forwarded(r) {
			h.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		principal := api.PrincipalFrom(r.Context())
		if principal == "" {
			principal = "anonymous"
		}
		action := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			action += "?" + r.URL.RawQuery
		}
		result := "ok"
		if sw.status >= 400 {
			result = "error"
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "audit",
			slog.Bool("audit", true), slog.String("door", "http"), slog.String("principal", principal),
			slog.String("client", r.RemoteAddr), slog.String("action", action),
			slog.String("result", result+" "+strconv.Itoa(sw.status)))
	})
}

// statusWriter remembers the status written; Unwrap keeps
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
