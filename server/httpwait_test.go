package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkHTTPWaitsWrap is what the stop's tracking and deadlines add to a
// request: GET of a handler that writes nothing, over a real connection,
// without (bare) and with httpWaits.wrap. Compare the two ns/op of one run.
func BenchmarkHTTPWaitsWrap(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", noop}, {"wrapped", new(httpWaits).wrap(noop)}} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			cl := srv.Client()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := cl.Get(srv.URL)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
