package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runnel/runnel/server/servertest"
)

// Every page of the UI at a desktop (1400 px) and a phone (390 px) width:
// each renders its content without a horizontal scrollbar, and a screenshot
// of each goes to $RUNNEL_SCREENSHOTS (for review) or a temp dir. The live
// tail keeps a stream open; ?tail=paused opens the tab without one, so a
// screenshot tool that waits for the network to go idle can capture it.
func TestUIPagesAtTwoWidths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	node := servertest.Start(t, servertest.Options{})
	const topic, group = "pages", "pages-group"
	uiHTTP(t, "POST", node.URL+"/v1/topics", map[string]any{"name": topic, "partitions": 3}, nil)
	for i := range 12 {
		uiProduce(t, node, topic, "json", fmt.Sprintf("customer-%d", i), map[string]any{"order": i, "item": "book", "qty": i % 4})
	}
	commit := map[string]any{"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 1}}}
	if code := uiHTTP(t, "POST", node.URL+"/v1/groups/"+group+"/offsets", commit, nil); code != http.StatusOK {
		t.Fatalf("commit: %d", code)
	}
	ctx := uiBrowser(t)
	watchConsole(t, ctx)
	shots := newShots(t)
	ui := node.URL + "/ui/"
	pages := []struct{ name, hash, ready string }{
		{"cluster", "#/cluster", `document.querySelectorAll('main table tbody tr').length >= 2`},
		{"topics", "#/topics", `!!document.querySelector('main a[href="#/topics/pages"]')`},
		{"topic-messages", "#/topics/" + topic, `document.querySelectorAll('main table tbody tr').length >= 3 && document.querySelector('main').innerText.includes('customer-')`},
		{"topic-produce", "#/topics/" + topic + "?tab=produce", `!!document.querySelector('#tabpanel form')`},
		{"topic-tail", "#/topics/" + topic + "?tab=tail&tail=paused", `document.querySelector('[data-test=tail-state]')?.textContent === 'paused'`},
		{"topic-configs", "#/topics/" + topic + "?tab=configs", `!!document.querySelector('#tabpanel form')`},
		{"topic-charts", "#/topics/" + topic + "?tab=charts", `!!document.querySelector('#tabpanel svg, #tabpanel figure')`},
		{"groups", "#/groups", `!!document.querySelector('main a[href="#/groups/pages-group"]')`},
		{"group", "#/groups/" + group, `!!document.querySelector('[data-test=group-lag]')`},
		{"charts", "#/charts", `document.querySelectorAll('svg.chart').length >= 1`},
	}
	for _, width := range []int{1400, 390} {
		for _, p := range pages {
			var opts []chromedp.EmulateViewportOption
			if width < 600 {
				opts = append(opts, chromedp.EmulateMobile) // a phone: overlay scrollbars, touch
			}
			uiDo(t, ctx, p.name, chromedp.EmulateViewport(int64(width), 900, opts...), chromedp.Navigate(ui+p.hash))
			uiWait(t, ctx, fmt.Sprintf("%s at %d px", p.name, width), p.ready)
			// Against the width left beside the (headless, classic) scrollbar.
			if w := uiEval[[]int](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] > w[1] {
				t.Errorf("%s is %d px wide in a %d px viewport (%d px beside the scrollbar)", p.name, w[0], width, w[1])
			}
			shots.take(ctx, fmt.Sprintf("%s-%d", p.name, width))
			if width < 600 {
				shots.viewport(ctx, fmt.Sprintf("%s-%d-first-screen", p.name, width))
			}
		}
	}
}
