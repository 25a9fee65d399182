package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runnel/runnel/server/servertest"
)

// The topics page walks the server's pages once the list does not fit in
// one (#/topics?limit=2 makes a page two topics), and its search becomes a
// name prefix asked of the server.
func TestUITopicPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	node := servertest.Start(t, servertest.Options{})
	names := []string{"pg-a", "pg-b", "pg-c", "pg-d", "pg-e"}
	for _, name := range names {
		uiHTTP(t, "POST", node.URL+"/v1/topics", map[string]any{"name": name, "partitions": 1}, nil)
	}
	ctx := uiBrowser(t)
	watchConsole(t, ctx)
	const rows = `[...document.querySelectorAll('main table tbody tr a[href^="#/topics/"]')].map(a => a.textContent).join(',')`
	uiDo(t, ctx, "open topics", chromedp.Navigate(node.URL+"/ui/#/topics?limit=2"))
	uiWait(t, ctx, "the pager", `document.querySelector('[data-test=topics-pager]')?.hidden === false && document.querySelectorAll('main table tbody tr').length === 2`)
	var seen []string
	for page := 1; page <= 3; page++ {
		got := uiEval[string](t, ctx, rows)
		seen = append(seen, got)
		if page < 3 {
			before := got
			uiDo(t, ctx, "next page", chromedp.Click(chromedp.CSS(`[data-test=topics-next]`)))
			uiWait(t, ctx, fmt.Sprintf("page %d", page+1), rows+` !== `+fmt.Sprintf("%q", before))
		}
	}
	if got := strings.Join(seen, ","); got != strings.Join(names, ",") {
		t.Fatalf("pages showed %q, want %q", got, strings.Join(names, ","))
	}
	if !uiEval[bool](t, ctx, `document.querySelector('[data-test=topics-next]').disabled`) {
		t.Fatal("Next is enabled on the last page")
	}
	uiDo(t, ctx, "previous page", chromedp.Click(chromedp.CSS(`[data-test=topics-prev]`)))
	uiWait(t, ctx, "page 2 again", rows+` === "pg-c,pg-d"`)
	uiDo(t, ctx, "search by prefix", chromedp.SendKeys(chromedp.CSS(`main input[type=search]`), "pg-d"))
	uiWait(t, ctx, "the prefix's page", rows+` === "pg-d"`)
}
