package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// The web UI driven in a real headless Chromium against a real runnel process:
// create a topic, produce in the UI, find the record by key in the message
// browser, see a record produced over HTTP arrive in the live tail, the groups
// page, charts, a 360 px wide viewport and the dark scheme. Screenshots go to
// $RUNNEL_SCREENSHOTS when set (for review), else to a temp dir.

type uiSession struct {
	t      *testing.T
	ctx    context.Context
	node   *servertest.Node
	shots  *uiShots
	ui     string // the UI's URL
	topic  string
	groups bool // the server has consumer groups
}

func TestUIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	node := servertest.Start(t, servertest.Options{})
	ctx := uiBrowser(t)
	watchConsole(t, ctx)
	recordAPICalls(t, ctx)
	s := &uiSession{t: t, ctx: ctx, node: node, shots: newShots(t), ui: node.URL + "/ui/", topic: "ui-orders"}

	s.cluster()
	s.createTopic()
	const key = "order-1"
	part, offset := s.produce(key)
	s.browse(key, part, offset)
	s.findByKey(key, part)
	s.tail()
	uiTailAcrossRestart(t, ctx, node, s.topic)
	uiConfigsAndCurl(t, ctx, node, s.shots, s.topic)
	s.groups = uiGroups(t, ctx, node, s.shots, s.ui, s.topic)
	uiDelete(t, ctx, node, s.shots, s.ui)
	s.layout()
}

// cluster: the quorum and brokers of the real node.
func (s *uiSession) cluster() {
	s.t.Helper()
	t, ctx, node, shots, ui := s.t, s.ctx, s.node, s.shots, s.ui
	// Cluster page: quorum and brokers of the real node.
	var cluster api.Cluster
	uiHTTP(t, "GET", node.URL+"/v1/cluster", nil, &cluster)
	uiDo(t, ctx, "open cluster page", chromedp.Navigate(ui+"#/cluster"))
	uiWait(t, ctx, "cluster id", fmt.Sprintf(`document.querySelector('[data-test=cluster-id]')?.textContent === %q`, cluster.ClusterID))
	uiWait(t, ctx, "controller leader badge", `document.querySelector('main').innerText.includes('leader')`)
	shots.take(ctx, "cluster")
}

// createTopic creates the topic in the UI.
func (s *uiSession) createTopic() {
	s.t.Helper()
	t, ctx, node, shots, ui, topic := s.t, s.ctx, s.node, s.shots, s.ui, s.topic
	uiDo(t, ctx, "create topic",
		chromedp.Navigate(ui+"#/topics"),
		chromedp.Click(chromedp.CSS(`[data-test=new-topic]`)),
		chromedp.SendKeys(chromedp.CSS(`form[aria-label="Create topic"] input[name=name]`), topic),
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Create topic"] input[name=partitions]`), "3"),
		chromedp.Click(chromedp.CSS(`[data-test=create-topic]`)))
	uiWait(t, ctx, "topic page", fmt.Sprintf(`location.hash === '#/topics/%s' && document.querySelectorAll('main table tbody tr').length === 3`, topic))
	var td api.TopicDetail
	if code := uiHTTP(t, "GET", node.URL+"/v1/topics/"+topic, nil, &td); code != 200 || len(td.Partitions) != 3 {
		t.Fatalf("topic created in the UI: status %d, %d partitions", code, len(td.Partitions))
	}
	shots.take(ctx, "topic-created")

	// Creating it again shows the server's problem in the form.
	uiDo(t, ctx, "create the topic again",
		chromedp.Navigate(ui+"#/topics"),
		chromedp.Click(chromedp.CSS(`[data-test=new-topic]`)),
		chromedp.SendKeys(chromedp.CSS(`form[aria-label="Create topic"] input[name=name]`), topic),
		chromedp.Click(chromedp.CSS(`[data-test=create-topic]`)))
	uiWait(t, ctx, "problem shown", `document.querySelector('form[aria-label="Create topic"] .error')?.textContent.includes('already exists')`)
	shots.viewport(ctx, "topic-exists")
	uiDo(t, ctx, "back to the topic", chromedp.Navigate(ui+"#/topics/"+topic))
	uiWait(t, ctx, "topic page", `document.querySelectorAll('main table tbody tr').length === 3`)
}

// produce sends a record with a key, a JSON value and a header from the UI;
// the key picks the partition as Kafka's partitioner would.
func (s *uiSession) produce(key string) (int, string) {
	s.t.Helper()
	t, ctx, node, shots, topic := s.t, s.ctx, s.node, s.shots, s.topic
	produceForm := `form[aria-label="Produce a message"] `
	uiDo(t, ctx, "produce",
		chromedp.Click(chromedp.CSS(`#tab-produce`)),
		chromedp.SendKeys(chromedp.CSS(produceForm+`input[name=key]`), key),
		chromedp.SetValue(chromedp.CSS(produceForm+`select[name=encoding]`), "json"),
		chromedp.SendKeys(chromedp.CSS(produceForm+`textarea[name=value]`), `{"id":1,"item":"tea"}`),
		chromedp.Click(chromedp.CSS(produceForm+`fieldset button`)),
		chromedp.SendKeys(chromedp.CSS(produceForm+`input[name=header-key]`), "source"),
		chromedp.SendKeys(chromedp.CSS(produceForm+`input[name=header-value]`), "ui-test"),
		chromedp.Click(chromedp.CSS(`[data-test=produce]`)))
	uiWait(t, ctx, "produce result", `!!document.querySelector('[data-test=produced]')`)
	produced := uiEval[string](t, ctx, `document.querySelector('[data-test=produced]').textContent`)
	m := regexp.MustCompile(`partition (\d+) at offset (\d+)`).FindStringSubmatch(produced)
	if m == nil {
		t.Fatalf("produce result %q", produced)
	}
	part, _ := strconv.Atoi(m[1])
	if want := kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte(key)}, 3); part != want {
		t.Errorf("UI produced key %q to partition %d, Kafka's partitioner picks %d", key, part, want)
	}
	var got struct {
		Records []struct {
			Key     string            `json:"key"`
			Value   json.RawMessage   `json:"value"`
			Headers map[string]string `json:"headers"`
		} `json:"records"`
	}
	uiHTTP(t, "GET", fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%s&encoding=json", node.URL, topic, part, m[2]), nil, &got)
	if len(got.Records) != 1 || got.Records[0].Key != key || string(got.Records[0].Value) != `{"id":1,"item":"tea"}` || got.Records[0].Headers["source"] != "ui-test" {
		t.Fatalf("record produced in the UI reads back as %+v", got.Records)
	}
	shots.take(ctx, "produced")

	return part, m[2]
}

// browse: "Show in browser", the newest records, two partitions from the
// earliest offset, and the JSON lines export.
func (s *uiSession) browse(key string, part int, offset string) {
	s.t.Helper()
	t, ctx, node, topic := s.t, s.ctx, s.node, s.topic
	// "Show in browser" opens the message browser at the produced record.
	uiDo(t, ctx, "show in browser", chromedp.Click(chromedp.CSS(`[data-test=produced] button`)))
	uiWait(t, ctx, "browser at the produced record", fmt.Sprintf(
		`document.querySelectorAll('.records article').length === 1 && !!document.querySelector('.records article[data-partition="%d"][data-offset="%s"]')`, part, offset))

	// More records over HTTP, so find-by-key has something to skip.
	for i := range 20 {
		uiProduce(t, node, topic, "json", fmt.Sprintf("other-%d", i), map[string]int{"n": i})
	}

	// Message browser: newest records across partitions, then find by key.
	uiDo(t, ctx, "browse newest",
		chromedp.Evaluate[chromedp.Void](`for (const b of document.querySelectorAll('form[aria-label="Browse messages"] input[name=partition]')) b.checked = b.value === 'all'`),
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Browse messages"] select[name=start]`), "newest"),
		chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, ctx, "21 newest records", `document.querySelectorAll('.records article').length === 21`)
	// Partitions 0 and 2 from the earliest offset: exactly their records.
	var hw api.TopicDetail
	uiHTTP(t, "GET", node.URL+"/v1/topics/"+topic, nil, &hw)
	uiDo(t, ctx, "browse two partitions",
		chromedp.Evaluate[chromedp.Void](`for (const b of document.querySelectorAll('form[aria-label="Browse messages"] input[name=partition]')) b.checked = b.value === '0' || b.value === '2'`),
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Browse messages"] select[name=start]`), "earliest"),
		chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, ctx, "records of partitions 0 and 2", fmt.Sprintf(
		`document.querySelectorAll('.records article').length === %d && document.querySelectorAll('.records article[data-partition="1"]').length === 0`,
		hw.Partitions[0].HighWatermark+hw.Partitions[2].HighWatermark))
	uiDo(t, ctx, "back to newest",
		chromedp.Evaluate[chromedp.Void](`for (const b of document.querySelectorAll('form[aria-label="Browse messages"] input[name=partition]')) b.checked = b.value === 'all'`),
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Browse messages"] select[name=start]`), "newest"),
		chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
	uiWait(t, ctx, "21 newest records again", `document.querySelectorAll('.records article').length === 21`)
	// Export: capture the JSON lines the export link would download.
	export := uiEval[string](t, ctx, `new Promise((resolve) => {
		const orig = URL.createObjectURL;
		URL.createObjectURL = (blob) => { URL.createObjectURL = orig; blob.text().then(resolve); return orig(blob); };
		[...document.querySelectorAll('button')].find(b => b.textContent === 'Export JSON lines').click();
	})`, chromedp.EvalAwaitPromise)
	lines := strings.Split(strings.TrimSpace(export), "\n")
	if len(lines) != 21 {
		t.Fatalf("export has %d lines, want 21:\n%s", len(lines), export)
	}
	var exported struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[20]), &exported); err != nil || exported.Key != key || string(exported.Value) != `"{\"id\":1,\"item\":\"tea\"}"` {
		t.Errorf("oldest exported line %s (%v)", lines[20], err)
	}
}

// findByKey searches only the partition the key hashes to.
func (s *uiSession) findByKey(key string, part int) {
	s.t.Helper()
	t, ctx, shots := s.t, s.ctx, s.shots
	uiDo(t, ctx, "find by key",
		chromedp.SendKeys(chromedp.CSS(`form[aria-label="Find by key"] input[name=key]`), key),
		chromedp.Click(chromedp.CSS(`[data-test=find-key]`)))
	uiWait(t, ctx, "find result", fmt.Sprintf(`document.querySelector('[data-test=find-result]')?.textContent.includes('partition %d') && document.querySelector('[data-test=find-result]').textContent.includes('found 1.')`, part))
	value := uiEval[string](t, ctx, `document.querySelector('.records article .rec-value').textContent`)
	if value != "{\n  \"id\": 1,\n  \"item\": \"tea\"\n}" {
		t.Errorf("found record value shown as %q, want pretty-printed JSON", value)
	}
	scanned := uiEval[string](t, ctx, `document.querySelector('[data-test=find-result]').textContent`)
	if strings.Contains(scanned, "Scanned 21 ") {
		t.Errorf("find by key scanned every partition: %q", scanned)
	}
	shots.take(ctx, "find-by-key")
	s.binaryAndTime()
}

// binaryAndTime: a binary value shows as hex, or base64 when asked; starting
// at a timestamp an hour ago shows the records, an hour ahead none.
func (s *uiSession) binaryAndTime() {
	s.t.Helper()
	t, ctx := s.t, s.ctx
	uiProduce(t, s.node, s.topic, "base64", base64.StdEncoding.EncodeToString([]byte("bin-key")), base64.StdEncoding.EncodeToString([]byte{0, 0xff, 0x10}))
	uiDo(t, ctx, "find the binary record",
		chromedp.SetValue(chromedp.CSS(`form[aria-label="Find by key"] input[name=key]`), "bin-key"),
		chromedp.Click(chromedp.CSS(`[data-test=find-key]`)))
	uiWait(t, ctx, "binary value as hex", `document.querySelector('[data-test=find-result]')?.textContent.includes('found 1.') && document.querySelector('.records article .rec-value').textContent === '00ff 10'`)
	uiDo(t, ctx, "show base64", chromedp.SetValue(chromedp.CSS(`form[aria-label="Browse messages"] select[name=view]`), "base64"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('form[aria-label="Browse messages"] select[name=view]').dispatchEvent(new Event('change'))`))
	uiWait(t, ctx, "binary value as base64", `document.querySelector('.records article .rec-value').textContent === 'AP8Q'`)
	setTime := `(() => { const d = new Date(Date.now() + %d * 3600e3); const el = document.querySelector('form[aria-label="Browse messages"] input[name=timestamp]');
		el.value = new Date(d - d.getTimezoneOffset() * 6e4).toISOString().slice(0, 19); })()`
	for _, c := range []struct {
		hours int
		want  string
	}{{-1, "> 20"}, {1, "=== 0"}} {
		uiDo(t, ctx, "start at a timestamp",
			chromedp.SetValue(chromedp.CSS(`form[aria-label="Browse messages"] select[name=start]`), "timestamp"),
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(setTime, c.hours)),
			chromedp.Click(chromedp.CSS(`[data-test=load-records]`)))
		uiWait(t, ctx, fmt.Sprintf("records from %+d h", c.hours), `document.querySelector('[role=status].muted')?.textContent.includes('records shown') && document.querySelectorAll('.records article').length `+c.want)
	}
}

// tail: arrow keys between the tabs, then a record produced over HTTP
// appears in the live tail.
func (s *uiSession) tail() {
	s.t.Helper()
	t, ctx, node, shots, topic := s.t, s.ctx, s.node, s.shots, s.topic
	// Keyboard: arrow keys move between the tabs.
	uiDo(t, ctx, "keyboard tabs", chromedp.Focus(chromedp.CSS(`#tab-messages`)), chromedp.KeyEvent(kb.ArrowRight))
	uiWait(t, ctx, "produce tab selected by keyboard", `document.activeElement.id === 'tab-produce' && document.activeElement.getAttribute('aria-selected') === 'true'`)

	// Live tail: a record produced over HTTP appears.
	uiDo(t, ctx, "open live tail", chromedp.Click(chromedp.CSS(`#tab-tail`)))
	uiWait(t, ctx, "stream open", `document.querySelector('[data-test=tail-state]')?.textContent === 'live'`)
	marker := fmt.Sprintf("tail-%d", time.Now().UnixNano())
	uiProduce(t, node, topic, "string", "k", marker)
	uiWait(t, ctx, "tailed record", fmt.Sprintf(`document.querySelector('[data-test=tail-records]').textContent.includes(%q)`, marker))
	if n := uiEval[int](t, ctx, `document.querySelectorAll('[data-test=tail-records] article').length`); n != 1 {
		t.Errorf("live tail from latest shows %d records, want 1", n)
	}
	shots.take(ctx, "live-tail")
}

// layout: charts, a 360 px viewport, the dark scheme and keyboard focus.
func (s *uiSession) layout() {
	s.t.Helper()
	t, ctx, shots, ui, topic := s.t, s.ctx, s.shots, s.ui, s.topic
	// Charts from the series endpoint: the produce above shows up.
	uiDo(t, ctx, "charts", chromedp.Navigate(ui+"#/charts"))
	uiWait(t, ctx, "charts drawn", `document.querySelectorAll('svg.chart path.line').length >= 1`)
	if s.groups {
		uiWait(t, ctx, "group in the lag chart", `[...document.querySelectorAll('figure')].some(f => f.textContent.includes('Consumer group lag') && f.textContent.includes('ui-group'))`)
	}
	shots.take(ctx, "charts")

	// 360 px wide: no horizontal scrolling of the page.
	uiDo(t, ctx, "narrow viewport", chromedp.EmulateViewport(360, 800), chromedp.Navigate(ui+"#/topics/"+topic))
	uiWait(t, ctx, "topic page at 360px", `document.querySelectorAll('main table tbody tr').length === 3`)
	if w := uiEval[int](t, ctx, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("page is %d px wide in a 360 px viewport", w)
	}
	shots.viewport(ctx, "narrow-topic")
	uiDo(t, ctx, "scroll to tabs", chromedp.ScrollIntoView(chromedp.CSS(`#tab-messages`)))
	shots.viewport(ctx, "narrow-messages")

	// Dark scheme follows the OS preference.
	dark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	uiDo(t, ctx, "dark scheme", chromedp.EmulateViewport(1280, 900), dark, chromedp.Navigate(ui+"#/topics"))
	uiWait(t, ctx, "topics list", fmt.Sprintf(`document.querySelector('main').innerText.includes(%q)`, topic))
	if bg := uiEval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(18, 23, 22)" {
		t.Errorf("dark scheme body background %s", bg)
	}
	shots.take(ctx, "dark-topics")

	// Keyboard: Tab reaches the skip link, then the navigation, with a
	// visible focus ring.
	uiDo(t, ctx, "tab through", chromedp.Reload())
	uiWait(t, ctx, "topics list", fmt.Sprintf(`document.querySelector('main').innerText.includes(%q)`, topic))
	uiDo(t, ctx, "tab through", chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab))
	focused := uiEval[string](t, ctx, `document.activeElement.tagName + ' ' + document.activeElement.textContent.trim() + ' ' + getComputedStyle(document.activeElement).outlineStyle`)
	if focused != "A Cluster solid" {
		t.Errorf("after three Tabs the focus is on %q, want the Cluster link with a solid outline", focused)
	}
	shots.viewport(ctx, "keyboard-focus")
}

// uiGroups checks the groups pages: a group with a committed offset shows
// its lag; a reset to latest is previewed (dry run, nothing committed) and
// then applied, and the lag drops to 0. A server without groups shows
// "no groups".
func uiGroups(t *testing.T, ctx context.Context, node *servertest.Node, shots *uiShots, ui, topic string) bool {
	t.Helper()
	const group = "ui-group"
	commit := map[string]any{"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 0}}}
	code := uiHTTP(t, "POST", node.URL+"/v1/groups/"+group+"/offsets", commit, nil)
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed || code == http.StatusNotImplemented {
		uiDo(t, ctx, "groups page", chromedp.Navigate(ui+"#/groups"))
		uiWait(t, ctx, "no groups", `!!document.querySelector('[data-test=no-groups]')`)
		shots.take(ctx, "groups-none")
		return false
	}
	if code != http.StatusOK {
		t.Fatalf("commit group offsets: status %d", code)
	}
	uiDo(t, ctx, "groups page", chromedp.Navigate(ui+"#/groups"))
	uiWait(t, ctx, "group listed", fmt.Sprintf(`!!document.querySelector('main a[href="#/groups/%s"]')`, group))
	var gd api.GroupDetail
	uiHTTP(t, "GET", node.URL+"/v1/groups/"+group, nil, &gd)
	if len(gd.Offsets) != 1 || gd.Lag != gd.Offsets[0].EndOffset || gd.Lag == 0 {
		t.Fatalf("group over HTTP: %+v, want lag = end offset of partition 0 > 0", gd)
	}
	uiDo(t, ctx, "group page", chromedp.Navigate(ui+"#/groups/"+group))
	uiWait(t, ctx, "group lag", fmt.Sprintf(`document.querySelector('[data-test=group-lag]')?.textContent === %q`, strconv.FormatInt(gd.Lag, 10)))
	uiDo(t, ctx, "reset dry run", chromedp.SetValue(chromedp.CSS(`form[aria-label="Reset offsets"] select[name=strategy]`), "latest"),
		chromedp.Click(chromedp.CSS(`[data-test=dry-run]`)))
	uiWait(t, ctx, "dry-run preview", fmt.Sprintf(`!!document.querySelector('[data-test=apply-reset]') && document.querySelector('form[aria-label="Reset offsets"] tbody').innerText.includes(%q)`, strconv.FormatInt(gd.Offsets[0].EndOffset, 10)))
	uiHTTP(t, "GET", node.URL+"/v1/groups/"+group, nil, &gd)
	if gd.Lag == 0 {
		t.Fatal("the dry run committed offsets")
	}
	shots.take(ctx, "group-reset-preview")
	uiDo(t, ctx, "apply reset", chromedp.Click(chromedp.CSS(`[data-test=apply-reset]`)), chromedp.Click(chromedp.CSS(`dialog button[type=submit]`)))
	uiWait(t, ctx, "lag 0 after the reset", `document.querySelector('[data-test=group-lag]')?.textContent === '0'`)
	uiHTTP(t, "GET", node.URL+"/v1/groups/"+group, nil, &gd)
	if gd.Lag != 0 {
		t.Errorf("lag after the reset in the UI: %d", gd.Lag)
	}
	shots.take(ctx, "group")
	uiKafkaMember(t, ctx, node, shots, ui, topic)
	return true
}

// uiKafkaMember shows a franz-go consumer, a member of a Kafka group, with its
// assignment on the group page.
func uiKafkaMember(t *testing.T, ctx context.Context, node *servertest.Node, shots *uiShots, ui, topic string) {
	t.Helper()
	if node.KafkaAddr == "" {
		return
	}
	const group = "ui-kafka-group"
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID("ui-e2e"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if fs := cl.PollFetches(pctx); fs.Err0() != nil && fs.NumRecords() == 0 {
		t.Fatalf("kafka consumer poll: %v", fs.Err0())
	}
	uiDo(t, ctx, "kafka group page", chromedp.Navigate(ui+"#/groups/"+group))
	uiWait(t, ctx, "kafka member with its assignment", fmt.Sprintf(
		`document.querySelector('main').innerText.includes('ui-e2e') && document.querySelector('main').innerText.includes(%q)`, topic+": 0, 1, 2"))
	shots.take(ctx, "group-kafka-member")
}

// uiConfigsAndCurl edits a topic config in the UI, then runs the command the
// produce form's "Copy as curl" shows and checks its record arrives.
func uiConfigsAndCurl(t *testing.T, ctx context.Context, node *servertest.Node, shots *uiShots, topic string) {
	t.Helper()
	uiDo(t, ctx, "topic charts", chromedp.Click(chromedp.CSS(`#tab-charts`)))
	uiWait(t, ctx, "topic charts drawn", `document.querySelectorAll('[role=tabpanel] svg.chart path.line').length >= 2`)
	cfgForm := `form[aria-label="Edit configs"] `
	uiDo(t, ctx, "edit configs",
		chromedp.Click(chromedp.CSS(`#tab-configs`)),
		chromedp.Click(chromedp.CSS(cfgForm+`.kv-rows + button`)),
		chromedp.SendKeys(chromedp.CSS(cfgForm+`input[name=config-key]`), "retention.ms"),
		chromedp.SendKeys(chromedp.CSS(cfgForm+`input[name=config-value]`), "3600000"),
		chromedp.Click(chromedp.CSS(cfgForm+`button[type=submit]`)))
	var td api.TopicDetail
	servertest.WaitFor(t, 30*time.Second, "config saved from the UI", func() bool {
		uiHTTP(t, "GET", node.URL+"/v1/topics/"+topic, nil, &td)
		return td.Configs["retention.ms"] == "3600000"
	})
	shots.take(ctx, "configs")

	if _, err := exec.LookPath("curl"); err != nil {
		t.Log("curl not installed: copy-as-curl command not executed")
		return
	}
	produceForm := `form[aria-label="Produce a message"] `
	uiDo(t, ctx, "curl of produce",
		chromedp.Click(chromedp.CSS(`#tab-produce`)),
		chromedp.SendKeys(chromedp.CSS(produceForm+`input[name=key]`), "curl-key"),
		chromedp.SendKeys(chromedp.CSS(produceForm+`textarea[name=value]`), "it's from curl"),
		chromedp.Click(chromedp.CSS(produceForm+`.curl-wrap > button`)))
	uiWait(t, ctx, "curl command", `!!document.querySelector('form[aria-label="Produce a message"] .curl pre')`)
	cmd := uiEval[string](t, ctx, `document.querySelector('form[aria-label="Produce a message"] .curl pre').textContent`)
	shots.take(ctx, "produce-curl")
	// stdout alone is the answer: the shell's own complaints (CI once saw
	// "getcwd() failed" when the working directory was removed under the
	// run) go to stderr, reported only on failure; and it runs in a
	// directory of its own.
	curl := exec.Command("sh", "-c", cmd+" -sS --fail-with-body")
	curl.Dir = t.TempDir()
	var stderr bytes.Buffer
	curl.Stderr = &stderr
	out, err := curl.Output()
	if err != nil {
		t.Fatalf("running the UI's curl command %s: %v\n%s%s", cmd, err, out, stderr.Bytes())
	}
	var res api.ProduceResponse
	if err := json.Unmarshal(out, &res); err != nil || len(res.Offsets) != 1 {
		t.Fatalf("curl output %s: %v", out, err)
	}
	var got consumePage
	uiHTTP(t, "GET", fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&encoding=string", node.URL, topic, res.Offsets[0].Partition, res.Offsets[0].Offset), nil, &got)
	if len(got.Records) != 1 || got.Records[0].Key == nil || *got.Records[0].Key != "curl-key" || got.Records[0].Value != "it's from curl" {
		t.Errorf("record produced by the UI's curl command reads back as %+v", got.Records)
	}
}

// uiDelete deletes a topic through the confirmation dialog.
func uiDelete(t *testing.T, ctx context.Context, node *servertest.Node, shots *uiShots, ui string) {
	t.Helper()
	const doomed = "ui-doomed"
	if code := uiHTTP(t, "POST", node.URL+"/v1/topics", map[string]any{"name": doomed, "partitions": 1}, nil); code >= 300 {
		t.Fatalf("create %s: status %d", doomed, code)
	}
	uiDo(t, ctx, "delete topic",
		chromedp.Navigate(ui+"#/topics/"+doomed),
		chromedp.Click(chromedp.CSS(`[data-test=delete-topic]`)),
		chromedp.SendKeys(chromedp.CSS(`dialog input`), doomed))
	uiWait(t, ctx, "confirm enabled", `!document.querySelector('dialog button[type=submit]').disabled`)
	shots.viewport(ctx, "delete-confirm")
	uiDo(t, ctx, "confirm delete", chromedp.Click(chromedp.CSS(`dialog button[type=submit]`)))
	uiWait(t, ctx, "back on topics", `location.hash === '#/topics'`)
	servertest.WaitFor(t, 30*time.Second, "topic deleted from the UI", func() bool {
		return uiHTTP(t, "GET", node.URL+"/v1/topics/"+doomed, nil, nil) == http.StatusNotFound
	})
}

// uiTailAcrossRestart kills and restarts the node three times under an open
// live tail. First plainly: EventSource reconnects by itself with
// Last-Event-ID. Then with a stand-in answering 503 on the node's address
// meanwhile (as a proxy would while the node is down): EventSource gives up on
// an error status, and the UI reconnects by itself from the positions of the
// last event id. Last with a fresh tail that has seen no event (no id): the UI
// resumes from the high watermarks read when it started. Every time the
// records produced right after the restart appear, none twice.
func uiTailAcrossRestart(t *testing.T, ctx context.Context, node *servertest.Node, topic string) {
	t.Helper()
	want := 1 // the record tailed before
	for round, blocked := range []bool{false, true, false} {
		if round == 2 {
			// A fresh tail that has had no event yet, so no id to resume with.
			uiDo(t, ctx, "fresh tail", chromedp.Click(chromedp.CSS(`#tab-charts`)), chromedp.Click(chromedp.CSS(`#tab-tail`)))
			uiWait(t, ctx, "fresh tail live", `document.querySelector('[data-test=tail-state]')?.textContent === 'live'`)
			want = 0
		}
		// Kill, not Stop: a graceful stop waits for open streams to end.
		node.Kill()
		uiWait(t, ctx, "tail notices the disconnect", `document.querySelector('[data-test=tail-state]').textContent !== 'live'`)
		if blocked {
			uiUnavailable(t, ctx, node.HTTPAddr)
		}
		node.Start()
		for i := range 3 {
			m := fmt.Sprintf("after-restart-%d-%d", round, i)
			uiProduce(t, node, topic, "string", m, m)
			want++
			uiWait(t, ctx, "record produced after the restart in the tail", fmt.Sprintf(`document.querySelector('[data-test=tail-records]').textContent.includes(%q)`, m))
		}
		ids := uiEval[[]string](t, ctx, `[...document.querySelectorAll('[data-test=tail-records] article')].map(a => a.dataset.partition + ':' + a.dataset.offset)`)
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("round %d: live tail shows %s twice", round, id)
			}
			seen[id] = true
		}
		if len(ids) != want {
			t.Errorf("round %d: live tail shows %d records, want %d: %v", round, len(ids), want, ids)
		}
		uiWait(t, ctx, "tail live again", `document.querySelector('[data-test=tail-state]').textContent === 'live'`)
	}
}

// uiUnavailable answers 503 on addr until the page's live tail has been
// refused at least once and has given the EventSource up.
func uiUnavailable(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on the node's address: %v", err)
	}
	var refused atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/records/stream") {
			refused.Add(1)
		}
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	})}
	go func() { _ = srv.Serve(ln) }()
	servertest.WaitFor(t, 20*time.Second, "a stream request refused with 503", func() bool { return refused.Load() > 0 })
	uiWait(t, ctx, "tail reconnecting", `document.querySelector('[data-test=tail-state]').textContent === 'reconnecting'`)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}
