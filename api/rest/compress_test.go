package rest_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

func gzipped(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func zstded(t *testing.T, data []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll(data, nil)
}

// Compressed produce bodies decode like plain ones; a bomb stops at the
// body limit (413), an unknown coding is 415, a damaged stream 400.
func TestProduceContentEncoding(t *testing.T) {
	e := newEnv(t, func(o *rest.Options, _ *memBackend) api.Backend { o.MaxBodyBytes = 1 << 20; return nil })
	e.createTopic("z", 1)
	body := []byte(`{"records":[{"value":"` + strings.Repeat("abc", 1000) + `"}]}`)
	for name, data := range map[string][]byte{"gzip": gzipped(t, body), "zstd": zstded(t, body)} {
		r := e.do("POST", "/v1/topics/z/records?encoding=string", string(data), "Content-Encoding", name)
		mustStatus(t, r, 200)
	}
	bomb := []byte(`{"records":[{"value":"` + strings.Repeat("a", 8<<20) + `"}]}`)
	for name, data := range map[string][]byte{"gzip": gzipped(t, bomb), "zstd": zstded(t, bomb)} {
		if len(data) > 1<<20 {
			t.Fatalf("%s bomb is %d bytes", name, len(data))
		}
		r := e.do("POST", "/v1/topics/z/records?encoding=string", string(data), "Content-Encoding", name)
		mustStatus(t, r, 413)
	}
	mustStatus(t, e.do("POST", "/v1/topics/z/records", string(body), "Content-Encoding", "br"), 415)
	r := e.do("POST", "/v1/topics/z/records", "not gzip at all", "Content-Encoding", "gzip")
	mustStatus(t, r, 400)
	r = e.do("GET", "/v1/topics/z/partitions/0/records?encoding=string", "")
	if mustStatus(t, r, 200); strings.Count(string(r.body), `"offset":`) != 2 {
		t.Fatalf("consumed %s", r.body)
	}
}

// Accept-Encoding picks the consume answer's coding: zstd first, then gzip.
func TestConsumeAcceptEncoding(t *testing.T) {
	e := newEnv(t)
	e.createTopic("z", 1)
	mustStatus(t, e.do("POST", "/v1/topics/z/records?encoding=string", `{"records":[{"value":"`+strings.Repeat("xyz", 500)+`"}]}`), 200)
	plain := e.do("GET", "/v1/topics/z/partitions/0/records?encoding=string", "", "Accept-Encoding", "identity")
	for _, c := range []struct{ accept, want string }{{"gzip", "gzip"}, {"gzip, zstd", "zstd"}, {"zstd;q=0, gzip", "gzip"}, {"br", ""}} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/topics/z/partitions/0/records?encoding=string", nil)
		req.Header.Set("Accept-Encoding", c.accept) // set by hand: the transport decodes nothing
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("Content-Encoding"); got != c.want {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", c.accept, got)
		}
		switch c.want {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			data, err = io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
		case "zstd":
			zr, _ := zstd.NewReader(nil)
			if data, err = zr.DecodeAll(data, nil); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(data, plain.body) {
			t.Fatalf("Accept-Encoding %q: %d bytes decoded differ from the plain answer", c.accept, len(data))
		}
	}
}
