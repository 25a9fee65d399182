package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// TestUITopicPagesMany (issue 19: the topic list stays responsive with
// 100,000 topics): with 1,200 topics (three pages) the topics page shows one page of the
// UI's page size (500), not the whole list; Next shows the next 500; and a
// search asks the server for the name prefix (the request is seen in the
// page's resource timing) and shows the matching topics only.
func TestUITopicPagesMany(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	node := servertest.Start(t, servertest.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr), kgo.RequestTimeoutOverhead(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(60_000)
	const total = 1200
	for lo := 0; lo < total; lo += 1000 {
		var names []string
		for i := lo; i < min(lo+1000, total); i++ {
			names = append(names, fmt.Sprintf("many-%05d", i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		res, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
		cancel()
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("creating %d topics: %v", len(names), err)
		}
	}
	ctx := uiBrowser(t)
	watchConsole(t, ctx)
	const rows = `document.querySelectorAll('main table tbody tr a[href^="#/topics/many-"]')`
	uiDo(t, ctx, "open topics", chromedp.Navigate(node.URL+"/ui/#/topics"))
	uiWait(t, ctx, "the first page", `document.querySelector('[data-test=topics-pager]')?.hidden === false && `+rows+`.length > 0`)
	if n := uiEval[int](t, ctx, rows+`.length`); n != 500 {
		t.Fatalf("the first page shows %d of %d topics, want one page of 500", n, total)
	}
	first := uiEval[string](t, ctx, rows+`[0].textContent`)
	uiDo(t, ctx, "next page", chromedp.Click(chromedp.CSS(`[data-test=topics-next]`)))
	uiWait(t, ctx, "page 2", rows+`.length === 500 && `+rows+`[0].textContent !== `+fmt.Sprintf("%q", first))
	uiDo(t, ctx, "search by prefix", chromedp.SendKeys(chromedp.CSS(`main input[type=search]`), "many-0119"))
	uiWait(t, ctx, "the prefix's topics", rows+`.length === 10 && [...`+rows+`].every(a => a.textContent.startsWith("many-0119"))`)
	if !uiEval[bool](t, ctx, `performance.getEntriesByType('resource').some(e => e.name.includes('/v1/topics?') && e.name.includes('prefix=many-0119'))`) {
		t.Fatal("the search was not asked of the server with prefix=many-0119")
	}
}
