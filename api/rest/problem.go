package rest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/runnel/runnel/api"
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

// problem writes err as an RFC 9457 problem and logs a 5xx answer's error
// with the request id (api.WriteProblemLog).
func (h *handler) problem(w http.ResponseWriter, r *http.Request, err error) {
	api.WriteProblemLog(w, r, err, h.log)
}
