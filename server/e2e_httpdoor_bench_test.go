package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkHTTPDoor is the HTTP door's speed against the Kafka listener of
// the same node in the same run (issue 17): franz-go produce and consume on
// the Kafka port are the baseline, then HTTP produce (JSON, NDJSON, binary
// RecordBatch) and HTTP consume (JSON, binary RecordBatch), each printed as
// MB/s of record values and as a ratio to the Kafka figure measured just
// before it; the medians over rounds (3 under RUNNEL_BENCH=1) are printed. One node,
// 1 KiB random values, 3 partitions, 4 concurrent HTTP clients sending
// 500-record bodies. `make bench-http` runs it with ~100 MB per path;
// without RUNNEL_BENCH=1 (make bench-short) it moves ~3 MB per path, a
// check that it still runs, not a measurement.
func BenchmarkHTTPDoor(b *testing.B) {
	total, rounds := 3_000, 1 // records per path
	if os.Getenv("RUNNEL_BENCH") == "1" {
		total, rounds = 100_000, 3
	}
	if v := os.Getenv("RUNNEL_BENCH_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("RUNNEL_BENCH_RECORDS"); v != "" {
		total, _ = strconv.Atoi(v)
	}
	var opts servertest.Options
	if os.Getenv("RUNNEL_BENCH_PPROF") != "" {
		opts.Args = []string{"--pprof"}
	}
	node := servertest.Start(b, opts)
	d := newDoorBench(b, node, total)
	for range b.N * rounds {
		d.run()
	}
	d.report()
}

const (
	doorParts      = 3
	doorPerBody    = 500
	doorValueBytes = 1024
	doorClients    = 4
)

type doorBench struct {
	b       *testing.B
	node    *servertest.Node
	total   int
	value   [][]byte // doorPerBody random values
	runs    int
	samples map[string][]doorSample // "produce/JSON" -> one per round
	order   []string
	notes   map[string]string // why a path has no figure
}

func newDoorBench(b *testing.B, node *servertest.Node, total int) *doorBench {
	d := &doorBench{b: b, node: node, total: total - total%doorPerBody, samples: map[string][]doorSample{}, notes: map[string]string{}}
	for range doorPerBody {
		v := make([]byte, doorValueBytes)
		for i := range v {
			v[i] = byte(rand.Uint32()) // incompressible
		}
		d.value = append(d.value, v)
	}
	return d
}

// run measures every path once, each right after the Kafka figure it is
// compared with (a fresh franz-go produce before an HTTP produce, a
// franz-go read of the same topic before an HTTP consume), so a change in
// the shared machine's load between paths moves both sides of a ratio.
func (d *doorBench) run() {
	d.runs++
	mb := func(dur time.Duration) float64 {
		return float64(d.total*doorValueBytes) / 1e6 / dur.Seconds()
	}
	topics := 0
	topic := func(what string) string {
		topics++
		name := fmt.Sprintf("door-%s-%d-%d", what, d.runs, topics)
		runnelTopic(d.b, d.node, name, doorParts)
		return name
	}
	kafkaTopic := topic("kafka")
	benchProduceValues(d.b, d.node.KafkaAddr, kafkaTopic, d.total, d.value) // what the consumes read
	for _, f := range []struct{ name, ctype, query string }{
		{"JSON", "application/json", "?encoding=base64"},
		{"NDJSON", "application/x-ndjson", "?encoding=base64"},
		{"binary RecordBatch", batchMediaType, ""},
	} {
		if !d.wanted("produce") {
			break
		}
		kafka := mb(benchProduceValues(d.b, d.node.KafkaAddr, topic("k"), d.total, d.value))
		stop := d.profile("produce-" + metricName(f.name))
		dur, err := d.httpProduce(topic("p"), f.ctype, f.query)
		stop()
		d.add("produce", f.name, kafka, rateOrZero(mb, dur, err), err)
	}
	consume := func(name string, fn func() (time.Duration, error)) {
		if !d.wanted("consume") {
			return
		}
		kafka := mb(benchConsume(d.b, d.node.KafkaAddr, kafkaTopic, d.total))
		stop := d.profile("consume-" + metricName(name))
		dur, err := fn()
		stop()
		d.add("consume", name, kafka, rateOrZero(mb, dur, err), err)
	}
	consume("JSON", func() (time.Duration, error) {
		return d.httpConsume(kafkaTopic, "application/json", "&encoding=base64")
	})
	consume("binary RecordBatch", func() (time.Duration, error) { return d.httpConsume(kafkaTopic, batchMediaType, "") })
	consume("SSE live tail", func() (time.Duration, error) { return d.sseConsume(kafkaTopic) })
}

// wanted says whether a direction's paths run: all of them unless
// RUNNEL_BENCH_ONLY names one (produce or consume), to profile one side.
func (d *doorBench) wanted(dir string) bool {
	only := os.Getenv("RUNNEL_BENCH_ONLY")
	return only == "" || only == dir
}

// doorSample is one path's figures in one round.
type doorSample struct{ kafka, http float64 }

func (d *doorBench) add(dir, name string, kafka, http float64, err error) {
	key := dir + "/" + name
	if _, ok := d.samples[key]; !ok {
		d.order = append(d.order, key)
	}
	d.samples[key] = append(d.samples[key], doorSample{kafka, http})
	if err != nil {
		d.notes[key] = errNote(err)
	}
}

// sseConsume reads the topic's records from the start through one SSE
// stream of all partitions until it has seen them all.
func (d *doorBench) sseConsume(topic string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.node.URL+"/v1/topics/"+topic+"/records/stream?offset=earliest&encoding=base64", nil)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("%d %s", resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for got := 0; got < d.total; {
		if !sc.Scan() {
			return 0, fmt.Errorf("stream ended after %d of %d records: %v", got, d.total, sc.Err())
		}
		if bytes.Equal(sc.Bytes(), []byte("event: record")) {
			got++
		}
	}
	return time.Since(start), nil
}

// profile saves 2 s CPU and allocation profiles of the node taken while
// a path runs into $RUNNEL_BENCH_PPROF/name.pprof and name.allocs.pprof
// (for `go tool pprof`); the returned func waits for them.
func (d *doorBench) profile(name string) func() {
	dir := os.Getenv("RUNNEL_BENCH_PPROF")
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for file, path := range map[string]string{name + ".pprof": "profile", name + ".allocs.pprof": "allocs"} {
		wg.Go(func() {
			resp, err := http.Get(d.node.URL + "/debug/pprof/" + path + "?seconds=2")
			if err != nil {
				d.b.Log(err)
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(dir+"/"+file, data, 0o644); err != nil {
				d.b.Log(err)
			}
		})
	}
	return wg.Wait
}

func rateOrZero(mb func(time.Duration) float64, dur time.Duration, err error) float64 {
	if err != nil {
		return 0
	}
	return mb(dur)
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// report prints, per path, the median over rounds of the HTTP and the
// paired Kafka MB/s and of their ratio, with the ratios' range.
func (d *doorBench) report() {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d records of %d B per path, %d partitions, %d HTTP clients, %d records per HTTP body, %d round(s); medians\n",
		d.total, doorValueBytes, doorParts, doorClients, doorPerBody, d.runs)
	fmt.Fprintf(&sb, "| path | HTTP MB/s | Kafka MB/s (same round) | ratio | ratio range |\n|---|---|---|---|---|\n")
	for _, key := range d.order {
		ss := d.samples[key]
		if note := d.notes[key]; note != "" {
			fmt.Fprintf(&sb, "| %s | n/a (%s) | | | |\n", key, note)
			continue
		}
		var h, k, r []float64
		for _, x := range ss {
			h, k, r = append(h, x.http), append(k, x.kafka), append(r, x.http/x.kafka)
		}
		sort.Float64s(r)
		fmt.Fprintf(&sb, "| %s | %.0f | %.0f | %.2f | %.2f-%.2f |\n", key, median(h), median(k), median(r), r[0], r[len(r)-1])
		d.b.ReportMetric(median(r), strings.ReplaceAll(strings.SplitN(key, "/", 2)[0]+"_"+metricName(strings.SplitN(key, "/", 2)[1]), " ", "_")+"_ratio")
	}
	d.b.Log(sb.String())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func metricName(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.Fields(s)[0], " ", "_"))
}

// benchProduceValues produces n records cycling through values with
// franz-go's defaults (distinct random values: snappy gains nothing).
func benchProduceValues(b *testing.B, addr, topic string, n int, values [][]byte) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.SliceRecord(values[0])).FirstErr(); err != nil { // warm up
		b.Fatal(err)
	}
	var failed atomic.Value
	start := time.Now()
	for i := range n - 1 {
		cl.Produce(ctx, kgo.SliceRecord(values[i%len(values)]), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// batchMediaType is the binary batch media type: Kafka RecordBatch v2.
const batchMediaType = "application/vnd.kafka.recordbatch"

// body renders the doorPerBody values in one produce format.
func (d *doorBench) body(ctype string, part int) []byte {
	switch ctype {
	case "application/json":
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for i, v := range d.value {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"value":"%s","partition":%d}`, base64.StdEncoding.EncodeToString(v), part)
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	case "application/x-ndjson":
		var sb strings.Builder
		for _, v := range d.value {
			fmt.Fprintf(&sb, `{"value":"%s","partition":%d}`+"\n", base64.StdEncoding.EncodeToString(v), part)
		}
		return []byte(sb.String())
	}
	return kafkaBatch(d.value)
}

// httpProduce sends d.total records in doorPerBody-record bodies from
// doorClients goroutines, each body to one partition in turn.
func (d *doorBench) httpProduce(topic, ctype, query string) (time.Duration, error) {
	bodies := make([][]byte, doorParts)
	for p := range bodies {
		bodies[p] = d.body(ctype, p)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: doorClients, DisableCompression: true}}
	defer client.CloseIdleConnections()
	post := func(i int) error {
		p := i % doorParts
		url := fmt.Sprintf("%s/v1/topics/%s/records%s", d.node.URL, topic, query)
		if ctype == batchMediaType {
			url += fmt.Sprintf("?partition=%d", p)
		}
		resp, err := client.Post(url, ctype, bytes.NewReader(bodies[p]))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, data)
		}
		return nil
	}
	if err := post(0); err != nil { // warm up, and is the format served?
		return 0, err
	}
	n := d.total/doorPerBody - 1
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range doorClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := post(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	// The warm-up body counts toward the records, not the time: scale.
	return time.Since(start) * time.Duration(n+1) / time.Duration(max(n, 1)), firstErr
}

// httpConsume reads every partition of topic from the start, one reader
// per partition (as franz-go fetches all partitions at once).
func (d *doorBench) httpConsume(topic, accept, query string) (time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: doorParts, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var got atomic.Int64
	errs := make([]error, doorParts)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range doorParts {
		wg.Go(func() {
			var buf bytes.Buffer // reused: the client's share stays small
			for off := int64(0); ; {
				n, next, hwm, err := consumeOnce(client, &buf, d.node.URL, topic, p, off, accept, query)
				if err != nil {
					errs[p] = err
					return
				}
				got.Add(int64(n))
				off = next
				if off >= hwm {
					return
				}
			}
		})
	}
	wg.Wait()
	dur := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	if int(got.Load()) < d.total {
		return 0, fmt.Errorf("consumed %d of %d records", got.Load(), d.total)
	}
	return dur, nil
}

// consumeOnce is one consume request: records read, next offset, high
// watermark.
func consumeOnce(client *http.Client, buf *bytes.Buffer, base, topic string, p int, off int64, accept, query string) (int, int64, int64, error) {
	url := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_records=4000&max_bytes=4194304%s", base, topic, p, off, query)
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, 0, 0, err
	}
	data := buf.Bytes()
	if resp.StatusCode != 200 {
		return 0, 0, 0, fmt.Errorf("%d %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, accept) {
		return 0, 0, 0, fmt.Errorf("asked for %s, got %s", accept, ct)
	}
	if accept == batchMediaType {
		return countBinary(resp.Header, data, off)
	}
	// The client's share stays small: the offsets are read from the tail,
	// records counted by their opening field (base64 values hold no '{').
	tail := data[bytes.LastIndex(data, []byte(`],"next_offset":`))+1:]
	var res struct {
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
	}
	if err := json.Unmarshal(append([]byte{'{'}, tail[1:]...), &res); err != nil {
		return 0, 0, 0, fmt.Errorf("%v: %.100s", err, tail)
	}
	return bytes.Count(data, []byte(`{"partition":`)), res.NextOffset, res.HighWatermark, nil
}

// countBinary counts the records at or after off in concatenated batches
// (the first batch may start before off) and reads the offsets from the
// response headers.
func countBinary(h http.Header, data []byte, off int64) (int, int64, int64, error) {
	next, err1 := strconv.ParseInt(h.Get("Runnel-Next-Offset"), 10, 64)
	hwm, err2 := strconv.ParseInt(h.Get("Runnel-High-Watermark"), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, fmt.Errorf("offset headers: %v %v", err1, err2)
	}
	n := 0
	for len(data) >= 61 {
		base := int64(binary.BigEndian.Uint64(data))
		size := 12 + int(binary.BigEndian.Uint32(data[8:]))
		last := base + int64(binary.BigEndian.Uint32(data[23:]))
		if size > len(data) {
			break
		}
		n += int(last - max(base, off) + 1)
		data = data[size:]
	}
	return n, next, hwm, nil
}

// kafkaBatch encodes values as one uncompressed RecordBatch v2.
func kafkaBatch(values [][]byte) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		enc := r.AppendTo(nil)
		recs = binary.AppendVarint(recs, int64(len(enc)-1))
		recs = append(recs, enc[1:]...)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{Length: int32(61 - 12 + len(recs)), Magic: 2, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: recs}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// BenchmarkHTTPProduceLatency is the latency of single-record HTTP produces
// (acks=all, one node) sent at 500 requests/s from a few connections: p50
// and p99 reported, no assertion. The baseline, interleaved with them in
// the same run at the same rate (one every 2 ms, 1 ms after each
// produce), is GET /livez on the same node: a request that does nothing,
// so its tail is what the machine (scheduling, the network stack, the
// client) adds to any request; p99_vs_noop is the produce p99 as a
// multiple of it. Without RUNNEL_BENCH=1 it sends 200 of each. With
// RUNNEL_BENCH_PPROF=dir the node's CPU profile and execution trace of
// 3 s in the middle of the run are saved there (latency.pprof,
// latency.trace).
func BenchmarkHTTPProduceLatency(b *testing.B) {
	count := 200
	if os.Getenv("RUNNEL_BENCH") == "1" {
		count = 5_000
	}
	var opts servertest.Options
	if os.Getenv("RUNNEL_BENCH_PPROF") != "" {
		opts.Args = []string{"--pprof"}
	}
	node := servertest.Start(b, opts)
	runnelTopic(b, node, "latency", doorParts)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	body := []byte(`{"records":[{"value":"` + strings.Repeat("v", doorValueBytes) + `"}]}`)
	url := node.URL + "/v1/topics/latency/records?encoding=string&acks=all"
	send := func(noop bool) error {
		var resp *http.Response
		var err error
		if noop {
			resp, err = client.Get(node.URL + "/livez")
		} else {
			resp, err = client.Post(url, "application/json", bytes.NewReader(body))
		}
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	for range b.N {
		lat := [2][]time.Duration{make([]time.Duration, count), make([]time.Duration, count)} // produce, noop
		var wg sync.WaitGroup
		var failed atomic.Value
		tick := time.NewTicker(time.Millisecond) // each kind 500/s
		for i := range 2 * count {
			<-tick.C
			if i == count {
				wg.Go(func() { latencyProfile(b, node) })
			}
			wg.Go(func() {
				start := time.Now()
				if err := send(i%2 == 1); err != nil {
					failed.Store(err)
					return
				}
				lat[i%2][i/2] = time.Since(start)
			})
		}
		tick.Stop()
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		var p50, p99 [2]time.Duration
		for k := range lat {
			sort.Slice(lat[k], func(i, j int) bool { return lat[k][i] < lat[k][j] })
			p50[k], p99[k] = lat[k][count/2], lat[k][count*99/100]
		}
		b.Logf("single-record produce at 500 req/s, acks=all: p50 %v, p99 %v; GET /livez interleaved at 500 req/s: p50 %v, p99 %v (%d requests each)",
			p50[0], p99[0], p50[1], p99[1], count)
		b.ReportMetric(float64(p50[0].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(p99[0].Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(p99[1].Microseconds())/1000, "noop_p99_ms")
		b.ReportMetric(p99[0].Seconds()/p99[1].Seconds(), "p99_vs_noop")
	}
}

// latencyProfile saves 3 s of the node's CPU profile and execution trace
// into $RUNNEL_BENCH_PPROF (when set).
func latencyProfile(b *testing.B, node *servertest.Node) {
	dir := os.Getenv("RUNNEL_BENCH_PPROF")
	if dir == "" {
		return
	}
	var wg sync.WaitGroup
	for file, path := range map[string]string{"latency.pprof": "profile", "latency.trace": "trace"} {
		wg.Go(func() {
			resp, err := http.Get(node.URL + "/debug/pprof/" + path + "?seconds=3")
			if err != nil {
				b.Log(err)
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(dir+"/"+file, data, 0o644); err != nil {
				b.Log(err)
			}
		})
	}
	wg.Wait()
}
