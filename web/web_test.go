package web_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/server/servertest"
	"github.com/runnel/runnel/web"
)

func get(t *testing.T, h http.Handler, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// mounts are the ways the server may mount the handler.
func mounts() map[string]http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", web.Handler()))
	mux.Handle("/ui", http.StripPrefix("/ui", web.Handler()))
	plain := http.NewServeMux()
	plain.Handle("/ui/", web.Handler()) // no StripPrefix, as chi's Mount does
	plain.Handle("/ui", web.Handler())
	return map[string]http.Handler{"strip": mux, "plain": plain}
}

func TestHandlerServesAssets(t *testing.T) {
	tests := []struct {
		path     string
		status   int
		ctype    string
		contains string
	}{
		{"/ui/", 200, "text/html; charset=utf-8", `<script type="module" src="js/main.js">`},
		{"/ui/index.html", 200, "text/html; charset=utf-8", "<title>runnel</title>"},
		{"/ui/app.css", 200, "text/css; charset=utf-8", "prefers-color-scheme: dark"},
		{"/ui/js/main.js", 200, "text/javascript; charset=utf-8", "parseRoute"},
		{"/ui/js/pages/topic.js", 200, "text/javascript; charset=utf-8", "export async function render"},
		{"/ui/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"/ui/nope.js", 404, "", ""},
		{"/ui/js/nope/", 200, "text/html; charset=utf-8", "<title>runnel</title>"},
	}
	for name, h := range mounts() {
		for _, tc := range tests {
			t.Run(name+tc.path, func(t *testing.T) {
				resp := get(t, h, tc.path, nil)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if tc.status != 200 {
					return
				}
				if got := resp.Header.Get("Content-Type"); got != tc.ctype {
					t.Errorf("Content-Type %q, want %q", got, tc.ctype)
				}
				if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
					t.Error("missing X-Content-Type-Options: nosniff")
				}
				if !strings.Contains(string(body), tc.contains) {
					t.Errorf("body does not contain %q", tc.contains)
				}
			})
		}
	}
}

func TestHandlerIndexHeadersAndRedirect(t *testing.T) {
	for name, h := range mounts() {
		t.Run(name, func(t *testing.T) {
			resp := get(t, h, "/ui/", nil)
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
	// The bare mount path is redirected to the directory, relative to where the
	// handler is mounted, whether or not the prefix was stripped.
	for name, h := range map[string]http.Handler{
		"strip": http.StripPrefix("/ui", web.Handler()),
		"plain": web.Handler(),
	} {
		resp := get(t, h, "/ui?x=1", nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "ui/?x=1" {
			t.Errorf("%s /ui: status %d Location %q, want 301 to ui/?x=1", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

func TestHandlerRejectsTraversal(t *testing.T) {
	for _, p := range []string{"/js/../../web.go", "/../web.go", "/ui/../go.mod", "/static/index.html/x.js"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = p
		rec := httptest.NewRecorder()
		web.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, rec.Code)
		}
	}
}

func TestHandlerETagAndMethods(t *testing.T) {
	h := web.Handler()
	resp := get(t, h, "/app.css", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if resp = get(t, h, "/app.css", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d, want 304", resp.StatusCode)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/app.css", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", rec.Code)
	}
}

var (
	htmlRef   = regexp.MustCompile(`(?:src|href)="([^"#:]+)"`)
	importRef = regexp.MustCompile(`(?m)^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'`)
)

// TestAssetReferencesResolve checks every local file index.html references and
// every relative ES module import exists among the served assets: without a
// bundler, a typo in an import is otherwise only seen in a browser.
func TestAssetReferencesResolve(t *testing.T) {
	h := web.Handler()
	index, _ := io.ReadAll(get(t, h, "/index.html", nil).Body)
	refs := htmlRef.FindAllStringSubmatch(string(index), -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references only %d local files", len(refs))
	}
	for _, m := range refs {
		if strings.HasPrefix(m[1], "../") { // API pages served by the server, not assets
			continue
		}
		if resp := get(t, h, "/"+m[1], nil); resp.StatusCode != 200 {
			t.Errorf("index.html references %s: status %d", m[1], resp.StatusCode)
		}
	}
	count := 0
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".js" {
			return err
		}
		src, err := os.ReadFile(filepath.Join("static", p))
		if err != nil {
			return err
		}
		for _, m := range importRef.FindAllStringSubmatch(string(src), -1) {
			spec := m[1] + m[2]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: only relative imports work without a bundler", p, spec)
				continue
			}
			target := path.Join(path.Dir(p), spec)
			if resp := get(t, h, "/"+target, nil); resp.StatusCode != 200 {
				t.Errorf("%s imports %s: status %d", p, spec, resp.StatusCode)
			}
			count++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count < 20 {
		t.Errorf("found only %d imports: is the import pattern still right?", count)
	}
}

// TestNoExternalResources keeps the UI working offline: no http(s) URL may be
// loaded by the page or its modules.
func TestNoExternalResources(t *testing.T) {
	ext := regexp.MustCompile(`(?:src|href)\s*=\s*["']https?://|@import|url\(\s*["']?https?://|from\s+['"]https?://`)
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := os.ReadFile(filepath.Join("static", p))
		if err != nil {
			return err
		}
		if loc := ext.FindIndex(src); loc != nil {
			t.Errorf("%s loads an external resource: %q", p, src[loc[0]:min(len(src), loc[1]+40)])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nodeOrSkip returns the node binary; outside CI a missing node skips.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		servertest.MissingTool(t, "node not installed (the UI's JavaScript unit tests)")
	}
	return p
}

// copyModules copies static/js into dir beside a package.json declaring ES
// modules, so node imports the very files the browser loads.
func copyModules(t *testing.T, dir string) {
	t.Helper()
	src := os.DirFS(filepath.Join("static", "js"))
	if err := os.CopyFS(dir, src); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestJavaScriptUnits runs testdata/unit.mjs under node: the pure modules
// (records decoding, reset planning, chart scale, routes) and murmur2, whose
// partitions must equal franz-go's Kafka-compatible StickyKeyPartitioner.
func TestJavaScriptUnits(t *testing.T) {
	node := nodeOrSkip(t)
	dir := t.TempDir()
	js := filepath.Join(dir, "js")
	copyModules(t, js)

	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{{}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), []byte("order-42"), []byte("héllo wörld"), []byte("21")}
	for range 300 {
		k := make([]byte, rng.IntN(40))
		for i := range k {
			k[i] = byte(rng.UintN(256))
		}
		keys = append(keys, k)
	}
	counts := []int{1, 2, 3, 6, 7, 12, 100, 1000}
	in := struct {
		Keys   []string `json:"keys"`
		Counts []int    `json:"counts"`
	}{Counts: counts}
	for _, k := range keys {
		in.Keys = append(in.Keys, base64.StdEncoding.EncodeToString(k))
	}
	inPath := filepath.Join(dir, "input.json")
	data, _ := json.Marshal(in)
	if err := os.WriteFile(inPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "unit.mjs"))
	cmd := exec.Command(node, script, js, inPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var res struct {
		Partitions [][]int `json:"partitions"`
		Failures   []string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
	if len(res.Partitions) != len(keys) {
		t.Fatalf("node returned %d rows for %d keys", len(res.Partitions), len(keys))
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i, k := range keys {
		for j, n := range counts {
			want := part.Partition(&kgo.Record{Key: k}, n)
			if got := res.Partitions[i][j]; got != want {
				t.Errorf("key %x, %d partitions: JS murmur2 picks %d, Kafka (franz-go) %d", k, n, got, want)
			}
		}
	}
}

// FuzzHandlerPath: whatever the request path, the handler answers 200 only
// with one of the embedded files, or 301, 304 or 404, and never panics.
func FuzzHandlerPath(f *testing.F) {
	for _, s := range []string{"/", "/ui", "/ui/", "/js/main.js", "/ui/../../etc/passwd", "//x//app.css", "/a/b/c/", "%2e%2e/web.go", "/ui/js/pages/../main.js"} {
		f.Add(s)
	}
	h := web.Handler()
	assets := map[string]bool{}
	_ = fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(filepath.Join("static", p))
			assets[string(b)] = true
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, p string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = p
		req.RequestURI = p
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			if !assets[rec.Body.String()] {
				t.Fatalf("%q served %d bytes that are no embedded asset", p, rec.Body.Len())
			}
		case http.StatusMovedPermanently, http.StatusNotFound:
		default:
			t.Fatalf("%q: status %d", p, rec.Code)
		}
	})
}
