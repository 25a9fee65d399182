package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions in the HTTP consume and the UI: a record of a transaction
// says "transactional":true (absent otherwise); the message browser badges
// such records, hides aborted and open ones in read committed and shows them
// in read uncommitted; the topic page lists the open transactions writing to
// the topic (GET /v1/transactions) and hides the list once there are none.
// In read uncommitted a toggle shows the commit and abort markers as rows
// of their own ("commit marker", "abort marker") at their offsets; it is
// off and disabled in read committed, which never shows markers.
func TestUITransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "txu", "partitions": 1}, 201, nil)

	tx, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("txu"), kgo.TransactionalID("txu-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	runTxn(ctx, t, tx, true, "c1", "c2")
	runTxn(ctx, t, tx, false, "a1")
	beginTxn(ctx, t, tx, "o1") // left open until the end
	uiProduce(t, n, "txu", "string", "k", "p1")
	// Offsets: c1 c2 0-1, commit 2, a1 3, abort 4, o1 5, p1 6.

	// HTTP: the flag on each record, and only when true.
	var res struct {
		Records []map[string]any `json:"records"`
	}
	c.json("GET", "/v1/topics/txu/partitions/0/records?offset=0&encoding=string&isolation=read_uncommitted", nil, 200, &res)
	var got []string
	for _, r := range res.Records {
		v, _ := r["value"].(string)
		flag, present := r["transactional"]
		if want := v != "p1"; flag != any(true) && want || !want && present {
			b, _ := json.Marshal(r)
			t.Errorf("record %s: transactional %v (present %v), want it only on transactional records", b, flag, present)
		}
		got = append(got, v)
	}
	if want := []string{"c1", "c2", "a1", "o1", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted values %v, want %v", got, want)
	}

	bctx := uiBrowser(t)
	watchConsole(t, bctx)
	shots := newShots(t)
	uiDo(t, bctx, "open the topic", chromedp.Navigate(n.URL+"/ui/#/topics/txu"))
	const txns = `document.querySelector('[data-test=open-transactions]')`
	uiWait(t, bctx, "the open transaction", txns+` !== null && `+txns+`.innerText.includes('txu-producer') && `+txns+`.innerText.includes('Ongoing')`)
	// shown reads the browser's records: "value:badge" for each.
	const shown = `[...document.querySelectorAll('.records article.record')].map(a => a.querySelector('.rec-value').textContent + ':' + (a.querySelector('[data-test=txn-badge]') ? 'txn' : '-')).sort().join(',')`
	uiWait(t, bctx, "read committed records", shown+` === 'c1:txn,c2:txn'`)
	shots.take(bctx, "txn-read-committed")
	uiDo(t, bctx, "read uncommitted",
		chromedp.SetValue(chromedp.CSS(`select[name=isolation]`), "read_uncommitted"),
		chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, bctx, "read uncommitted records", shown+` === 'a1:txn,c1:txn,c2:txn,o1:txn,p1:-'`)
	shots.take(bctx, "txn-read-uncommitted")

	// rows reads the browser's rows in offset order: "offset:value", or
	// "offset:<badge>" for a marker row.
	const rows = `[...document.querySelectorAll('.records article.record')].sort((a, b) => a.dataset.offset - b.dataset.offset).map(a => a.dataset.offset + ':' + (a.dataset.test === 'marker' ? a.querySelector('header .badge').textContent : a.querySelector('.rec-value').textContent)).join(',')`
	const box = `document.querySelector('input[name=markers]')`
	setIsolation := func(iso string) {
		t.Helper()
		uiEval[bool](t, bctx, `(() => { const s = document.querySelector('select[name=isolation]'); s.value = '`+iso+`'; s.dispatchEvent(new Event('change')); return true; })()`)
	}
	uiWait(t, bctx, "the marker toggle, enabled in read uncommitted", box+` !== null && !`+box+`.disabled`)
	uiDo(t, bctx, "show markers",
		chromedp.Click(chromedp.CSS(`input[name=markers]`)),
		chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, bctx, "marker rows", rows+` === '0:c1,1:c2,2:commit marker,3:a1,4:abort marker,5:o1,6:p1'`)
	shots.take(bctx, "txn-markers")
	setIsolation("read_committed")
	uiWait(t, bctx, "the marker toggle off and disabled in read committed", box+`.disabled && !`+box+`.checked`)
	uiDo(t, bctx, "read committed again", chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, bctx, "read committed rows, no markers", rows+` === '0:c1,1:c2'`)
	setIsolation("read_uncommitted")
	uiDo(t, bctx, "read uncommitted without markers", chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, bctx, "read uncommitted rows, no markers", rows+` === '0:c1,1:c2,3:a1,5:o1,6:p1'`)

	endTxn(ctx, t, tx, true)
	uiWait(t, bctx, "no open transaction listed", txns+` === null`)
}
