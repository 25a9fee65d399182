package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/runnel/runnel/api/rest"
	"github.com/runnel/runnel/server/servertest"
)

// Browser plumbing for the UI end-to-end test: a headless Chromium, console
// and API-call watchers, screenshots, and small helpers.

// The web UI driven in a real headless Chromium against a real runnel process:
// create a topic, produce in the UI, find the record by key in the message
// browser, see a record produced over HTTP arrive in the live tail, the groups
// page, charts, a 360 px wide viewport and the dark scheme. Screenshots go to
// $RUNNEL_SCREENSHOTS when set (for review), else to a temp dir.

const chromiumPath = "/usr/bin/chromium"

func uiBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, err := exec.LookPath("chromium"); err == nil {
			path = p
		} else {
			servertest.MissingTool(t, "chromium not installed")
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, extra...)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelTimeout() })
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// uiConsole records exceptions and console.error calls of the page; the test
// fails on any at the end.
type uiConsole struct {
	mu   sync.Mutex
	errs []string
	wg   sync.WaitGroup
}

func watchConsole(t *testing.T, ctx context.Context) *uiConsole {
	c := &uiConsole{}
	cctx, cancel := context.WithCancel(ctx)
	msgs := chromedp.Console(cctx)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || (m.Type == "error" && m.Source == "") {
				c.mu.Lock()
				c.errs = append(c.errs, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		c.wg.Wait()
		for _, e := range c.errs {
			t.Errorf("browser console: %s", e)
		}
	})
	return c
}

// recordAPICalls checks, when the test ends, that every request the page sent
// to /v1/ is described by openapi.yaml and valid against it: the UI uses only
// the public API.
func recordAPICalls(t *testing.T, ctx context.Context) {
	var mu sync.Mutex
	var reqs []*network.Request
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.Contains(e.Request.URL, "/v1/") {
			mu.Lock()
			reqs = append(reqs, e.Request)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_, router, err := rest.NewSpecRouter()
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		paths := map[string]bool{}
		writes, withBody := 0, 0
		for _, r := range reqs {
			var body []byte
			for _, e := range r.PostDataEntries {
				body = append(body, e.Bytes...)
			}
			if r.Method == http.MethodPost || r.Method == http.MethodPatch {
				writes++
				if len(body) > 0 {
					withBody++
				}
			}
			req, _ := http.NewRequest(r.Method, r.URL, bytes.NewReader(body))
			if ct := r.Headers["Content-Type"]; ct != nil {
				req.Header.Set("Content-Type", fmt.Sprint(ct))
			}
			paths[r.Method+" "+req.URL.Path] = true
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Errorf("the UI called %s %s, which is not in openapi.yaml: %v", r.Method, r.URL, err)
				continue
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Errorf("the UI's request %s %s does not match openapi.yaml: %v", r.Method, r.URL, err)
			}
		}
		if writes == 0 || withBody != writes {
			t.Errorf("recorded %d POST/PATCH requests, %d with a body: the recorder misses bodies", writes, withBody)
		}
		t.Logf("the UI sent %d API requests to %d method+paths, all checked against openapi.yaml", len(reqs), len(paths))
	})
}

type uiShots struct {
	t   *testing.T
	dir string
	n   int
}

func newShots(t *testing.T) *uiShots {
	dir := os.Getenv("RUNNEL_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return &uiShots{t: t, dir: dir}
}

// take writes a PNG of the whole page.
func (s *uiShots) take(ctx context.Context, name string) {
	s.t.Helper()
	s.write(ctx, name, chromedp.FullScreenshot(100))
}

// viewport writes a PNG of what the viewport shows.
func (s *uiShots) viewport(ctx context.Context, name string) {
	s.t.Helper()
	s.write(ctx, name, chromedp.CaptureScreenshot())
}

func (s *uiShots) write(ctx context.Context, name string, shot chromedp.Action[[]byte]) {
	s.t.Helper()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	s.n++
	file := filepath.Join(s.dir, fmt.Sprintf("%02d-%s.png", s.n, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func uiDo(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// uiWait polls a JavaScript predicate in the page.
func uiWait(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
		t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, html)
	}
}

func uiEval[T any](t *testing.T, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ectx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func uiHTTP(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return resp.StatusCode
}

// uiProduce produces one record over HTTP.
func uiProduce(t *testing.T, node *servertest.Node, topic, encoding, key string, value any) {
	t.Helper()
	body := map[string]any{"records": []map[string]any{{"key": key, "value": value}}}
	if code := uiHTTP(t, "POST", node.URL+"/v1/topics/"+topic+"/records?encoding="+encoding, body, nil); code != http.StatusOK {
		t.Fatalf("produce over HTTP: status %d", code)
	}
}

// uiSession is one browser tab against one node, shared by the steps.
