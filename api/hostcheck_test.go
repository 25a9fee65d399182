package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHostCheck(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	trusted := func(r *http.Request) bool { return r.Header.Get("X-Trusted") != "" }
	check := HostCheck([]string{"runnel.internal", "*.svc.cluster.local", " Mixed.Case "}, trusted, nil)(ok)
	for host, want := range map[string]int{
		"":                            http.StatusNoContent,
		"localhost":                   http.StatusNoContent,
		"localhost:8080":              http.StatusNoContent,
		"LocalHost.:8080":             http.StatusNoContent,
		"ui.localhost":                http.StatusNoContent,
		"127.0.0.1:8080":              http.StatusNoContent,
		"[::1]:8080":                  http.StatusNoContent,
		"::1":                         http.StatusNoContent,
		"192.168.1.20":                http.StatusNoContent,
		"runnel.internal":             http.StatusNoContent,
		"mixed.case:1":                http.StatusNoContent,
		"runnel.ns.svc.cluster.local": http.StatusNoContent,
		"svc.cluster.local":           http.StatusMisdirectedRequest,
		"attacker.example":            http.StatusMisdirectedRequest,
		"attacker.example:8080":       http.StatusMisdirectedRequest,
		"localhost.attacker.example":  http.StatusMisdirectedRequest,
		"runnel.internal.evil":        http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io":            http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
		r.Host = host
		w := httptest.NewRecorder()
		check.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
		if want != http.StatusNoContent && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("Host %q: %s, want problem+json", host, w.Header().Get("Content-Type"))
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
	r.Host, r.Header["X-Trusted"] = "runnel-node-2:9093", []string{"1"}
	w := httptest.NewRecorder()
	check.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Errorf("trusted request: %d", w.Code)
	}
	r = httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
	r.Host = "attacker.example"
	w = httptest.NewRecorder()
	HostCheck([]string{"*"}, nil, nil)(ok).ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Errorf(`"*": %d`, w.Code)
	}
}
