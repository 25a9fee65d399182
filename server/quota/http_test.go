package quota

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// The HTTP door's enforcement in-process: a produce within the quota is
// served and charged by its body; the next one, far over it, is answered
// 429 with Retry-After before its body is read; a forwarded request is
// not metered again; a node without quotas passes everything.
func TestHTTPQuotaEnforcement(t *testing.T) {
	e := raftfsm.QuotaEntity{UserDefault: true}
	img := &raftfsm.Image{Quotas: map[string]raftfsm.Quota{e.Key(): {Entity: e, Values: map[string]float64{ProducerByteRate: 1}}}}
	n := NewNode(func() *raftfsm.Image { return img }, nil)
	read := 0
	h := n.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		read += len(b)
		w.WriteHeader(http.StatusOK)
	}), func(r *http.Request) bool { return r.Header.Get("X-Test-Forwarded") != "" })
	produce := func(forwarded bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/topics/t/records", strings.NewReader(strings.Repeat("x", 100)))
		if forwarded {
			r.Header.Set("X-Test-Forwarded", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := produce(false); w.Code != http.StatusOK || read != 100 {
		t.Fatalf("first produce: %d, %d bytes read", w.Code, read)
	}
	// 100 bytes at 1 byte/s: the client's clock is ~99 s ahead.
	w := produce(false)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || read != 100 {
		t.Fatalf("over quota: %d Retry-After %q, %d bytes read; body %s", w.Code, w.Header().Get("Retry-After"), read, w.Body)
	}
	if !strings.Contains(w.Body.String(), "quota") {
		t.Errorf("problem body %s does not name the quota", w.Body)
	}
	if w := produce(true); w.Code != http.StatusOK || read != 200 {
		t.Fatalf("forwarded produce: %d, %d bytes read", w.Code, read)
	}
	img = &raftfsm.Image{}
	if w := produce(false); w.Code != http.StatusOK || read != 300 {
		t.Fatalf("without quotas: %d, %d bytes read", w.Code, read)
	}
}
