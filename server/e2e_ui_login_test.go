package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// The UI under --auth required, in headless Chromium: the login page; a
// user allowed only to read a topic sees neither its produce tab nor a
// delete button (the page asks GET /v1/session what the user may do); the
// session cookie is HttpOnly and SameSite=Strict; a write sent from the
// page with the cookie but without the CSRF token is refused 403
// csrf-token-invalid, and the same write with the token goes through.
func TestUILoginReadOnlyAndCSRF(t *testing.T) {
	const admin = "ui-admin-pw"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin)}})
	c := newAPIClient(t, n)
	must := func(method, path string, body any, want int) {
		t.Helper()
		if resp, out := authDo(t, c, method, path, "admin", admin, body); resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
	}
	must("POST", "/v1/users", api.UserRequest{Name: "reader", Password: "reader-pw", Mechanism: "SCRAM-SHA-256"}, 201)
	must("POST", "/v1/topics", map[string]any{"name": "ro", "partitions": 1}, 201)
	must("POST", "/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "ro", Principal: "User:reader", Operation: "read", Permission: "allow"}, 201)

	ctx := uiBrowser(t)
	watchConsole(t, ctx)
	ui := n.URL + "/ui/"
	login := func(user, pwd string) {
		t.Helper()
		uiDo(t, ctx, "open the UI", chromedp.Navigate(ui+"#/topics"))
		uiWait(t, ctx, "the login page", `!!document.querySelector('[data-test=login-form]')`)
		uiDo(t, ctx, "log in as "+user,
			chromedp.SendKeys(chromedp.CSS(`#login-user`), user),
			chromedp.SendKeys(chromedp.CSS(`#login-password`), pwd),
			chromedp.Click(chromedp.CSS(`[data-test=login-submit]`)))
		uiWait(t, ctx, "the logged-in page", `location.hash === '#/cluster' && !!document.querySelector('[data-test=logout]')`)
	}
	login("reader", "reader-pw")
	uiDo(t, ctx, "open the topic", chromedp.Navigate(ui+"#/topics/ro"))
	uiWait(t, ctx, "the topic page", `!!document.querySelector('#tab-messages')`)
	if uiEval[bool](t, ctx, `!!document.querySelector('[data-test=delete-topic]') || !!document.querySelector('#tab-produce')`) {
		t.Fatal("a read-only user sees the delete button or the produce tab")
	}
	if got := uiEval[string](t, ctx, `document.cookie`); strings.Contains(got, api.SessionCookie) {
		t.Fatalf("the session cookie is readable by scripts: %q", got)
	}
	// The reader's write is refused by the ACLs whatever the page sends.
	forged := `fetch('../v1/topics/ro/records', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"records":[{"value":1}]}'}).then(r => r.status)`
	if code := uiEval[int](t, ctx, forged, chromedp.EvalAwaitPromise); code != http.StatusForbidden {
		t.Fatalf("reader's write: %d", code)
	}
	uiDo(t, ctx, "log out", chromedp.Click(chromedp.CSS(`[data-test=logout]`)))
	uiWait(t, ctx, "the login page again", `!!document.querySelector('[data-test=login-form]')`)

	login("admin", admin)
	uiDo(t, ctx, "open the topic as admin", chromedp.Navigate(ui+"#/topics/ro"))
	uiWait(t, ctx, "the admin's buttons", `!!document.querySelector('[data-test=delete-topic]') && !!document.querySelector('#tab-produce')`)
	// Forged: the cookie goes along (same origin), the CSRF token does not.
	problem := `fetch('../v1/topics/ro/records', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"records":[{"value":1}]}'}).then(async r => r.status + ' ' + (await r.json()).type)`
	if got := uiEval[string](t, ctx, problem, chromedp.EvalAwaitPromise); got != "403 "+api.ProblemTypePrefix+"csrf-token-invalid" {
		t.Fatalf("write without the CSRF token: %s", got)
	}
	withToken := `fetch('../v1/session').then(r => r.json()).then(s => fetch('../v1/topics/ro/records', {method: 'POST',
		headers: {'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token}, body: '{"records":[{"value":1}]}'})).then(r => r.status)`
	if code := uiEval[int](t, ctx, withToken, chromedp.EvalAwaitPromise); code != http.StatusOK {
		t.Fatalf("write with the CSRF token: %d", code)
	}
	// The cookie's attributes, as the browser stored them.
	resp, _ := authDo(t, c, "POST", "/v1/session", "", "", api.LoginRequest{User: "reader", Password: "reader-pw"})
	ck := resp.Header.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Fatalf("session cookie %q", ck)
	}
}
