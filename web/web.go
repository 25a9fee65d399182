// Package web is runnel's browser UI: static files embedded with go:embed and
// served by Handler. The UI is plain ES modules and hand-written CSS; `go build`
// alone yields it (no bundler, no npm, no CDN, no external fonts).
//
// The UI talks only to the public REST API (see openapi.yaml). It finds the API
// one directory above the directory it is served from, so mounted at /ui/ it
// calls /v1/...; mounted at /x/ui/ behind a proxy it calls /x/v1/....
//
// File map:
//
//	web.go              Handler: resolves paths, content types, ETags, headers
//	static/index.html   the single page; hash routes #/cluster, #/topics,
//	                    #/topics/{topic}, #/groups, #/groups/{group}, #/charts
//	static/app.css      light/dark via prefers-color-scheme, narrow-screen layout
//	static/js/main.js   router; a page context owns its timers and fetches
//	static/js/api.js    REST client, problem+json errors, connection indicator
//	static/js/pages/    cluster, topics, topic (tabs), groups, group, charts
//	static/js/browser.js message browser, find by key, JSON lines export
//	static/js/produce.js, tail.js (SSE live tail and its resume), chart.js
//	                    (inline-SVG line chart), murmur2.js (Kafka's key
//	                    partitioner), records.js (bytes as JSON/text/hex/base64),
//	                    groups.js (group shapes, reset planning), curl.js
//	                    ("copy as curl"), forms.js, dom.js
//	testdata/unit.mjs   node unit tests of the pure modules (web_test.go runs it)
//
// The end-to-end test in headless Chromium is server/e2e_ui_test.go.
//
// Handler holds no goroutines and no mutable state; it is safe for concurrent use.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var assets embed.FS

// contentType maps the extensions the UI uses to their media types, so the
// answer does not depend on the host's mime tables.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	case ".png":
		return "image/png"
	default:
		return "application/octet-stream"
	}
}

// csp allows only same-origin scripts, styles and connections: the UI needs
// nothing else, and it keeps a rendered record value from ever running code.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; form-action 'self'"

type file struct {
	data []byte
	etag string
	ctyp string
}

type handler struct {
	files map[string]file // by slash path below static/, e.g. "js/main.js"
}

// Handler serves the embedded UI. It is mount-path agnostic: mount it at any
// prefix, with or without http.StripPrefix; a request path is matched against
// the asset names by dropping leading segments until one matches, and a
// directory path serves index.html. A bare mount path without its trailing slash
// ("/ui") is redirected to "/ui/" so the page's relative asset URLs resolve.
func Handler() http.Handler {
	h := &handler{files: make(map[string]file)}
	err := fs.WalkDir(assets, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		h.files[strings.TrimPrefix(p, "static/")] = file{
			data: data,
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`,
			ctyp: contentType(p),
		}
		return nil
	})
	if err != nil {
		// The tree is compiled into the binary: failing to walk it is a build defect.
		panic(fmt.Sprintf("web: reading embedded assets: %v", err))
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "web: method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := h.resolve(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "index.html" && !strings.HasSuffix(r.URL.Path, "/") && !strings.HasSuffix(r.URL.Path, "index.html") {
		h.redirectToDir(w, r)
		return
	}
	f := h.files[name]
	hd := w.Header()
	hd.Set("Content-Type", f.ctyp)
	hd.Set("ETag", f.etag)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if name == "index.html" {
		hd.Set("Content-Security-Policy", csp)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.data))
}

// resolve maps a request path to an asset name. Directory paths (and the empty
// path left by StripPrefix of the mount point itself) resolve to index.html.
func (h *handler) resolve(p string) (string, bool) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i := range segs {
		name := strings.Join(segs[i:], "/")
		if _, ok := h.files[name]; ok && !strings.Contains(name, "..") {
			return name, true
		}
	}
	// No asset matched: a directory path means the page itself, and so does a
	// bare mount name ("/ui" or "" after StripPrefix). Anything else is an
	// unknown asset.
	if strings.HasSuffix(p, "/") || (len(segs) == 1 && !strings.Contains(segs[0], ".")) {
		return "index.html", true
	}
	return "", false
}

// redirectToDir answers "/ui" with a relative redirect to "ui/": the original
// request URI is used because StripPrefix may have emptied r.URL.Path.
func (h *handler) redirectToDir(w http.ResponseWriter, r *http.Request) {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	base := path.Base(orig)
	if base == "/" || base == "." || base == "" {
		base = "."
	}
	target := base + "/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	// Set Location by hand: http.Redirect would make it absolute, which breaks
	// behind a proxy that adds a path prefix.
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusMovedPermanently)
}
