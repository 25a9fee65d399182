package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// BenchmarkAuthOverhead: franz-go produce and consume of 1 KiB records on
// a node with --auth required, SCRAM-SHA-512 and 100 ACLs loaded (98 on
// other principals and topics, the client's write and read on its topic),
// against a node without authentication, in the same run.
//
// The machine it runs on is shared, so the two sides are measured in
// alternating rounds (9 per b.N, the side going first alternating too)
// and the figure is the median of the rounds' ratios (plain time / auth
// time: 1 is no overhead, the issue asks >= 0.9), which one round slowed
// by a neighbour does not move.
//
// Throughput is measured on logged-in clients, as a Kafka client lives:
// each round's producer is a new client whose login, metadata and
// producer id come before the clock starts; the consumer of each side is
// one client logged in before the first round that reads a prefilled
// topic from the start, consumePasses times per round. The login itself
// (SCRAM-SHA-512, 4096 iterations: the client's key derivation dominates)
// is reported apart, as the median time a new producer takes to log in
// and send its first record (*-client-start-ms).
//
// The HTTP door is measured the same way (http-*-ratio): the same user
// with Basic credentials on every request against none, 500 POSTs of 10
// records and reads of 100 records per GET, one request at a time on a
// kept-alive connection, so that what a request costs shows.
//
// Needs RUNNEL_BENCH=1 (it starts two servers).
func BenchmarkAuthOverhead(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	const admin = "bench-admin-pw"
	plain := servertest.Start(b, servertest.Options{})
	secure := servertest.Start(b, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(b, admin)}})
	post := func(path string, body any) { adminPost(b, secure.URL+path, admin, body) }
	post("/v1/users", api.UserRequest{Name: "bench", Password: "bench-pw", Mechanism: "SCRAM-SHA-512"})
	for i := range 98 {
		post("/v1/acls", api.ACL{ResourceType: "topic", ResourceName: fmt.Sprintf("other-%d", i), PatternType: []string{"literal", "prefixed"}[i%2],
			Principal: fmt.Sprintf("User:u%d", i), Operation: "read", Permission: "allow"})
	}
	post("/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "bench-", PatternType: "prefixed", Principal: "User:bench", Operation: "write", Permission: "allow"})
	post("/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "bench-", PatternType: "prefixed", Principal: "User:bench", Operation: "read", Permission: "allow"})
	login := kgo.SASL(scram.Auth{User: "bench", Pass: "bench-pw"}.AsSha512Mechanism())
	// Distinct random values, more of them than snappy's window holds:
	// the bytes cross the wire as they would for real data.
	values := make([][]byte, 256)
	for i := range values {
		values[i] = make([]byte, 1024)
		for j := range values[i] {
			values[i][j] = byte(rand.Uint32())
		}
	}
	const (
		perOp         = 40_000 // records per produce, and in the topic consumed
		consumePasses = 3      // reads of that topic per consume
		rounds        = 9
		httpPosts     = 500 // HTTP produce requests per round
		httpBatch     = 10  // records per HTTP produce request
		httpRead      = 100 // records per HTTP consume request
	)
	type side struct {
		node             *servertest.Node
		opts             []kgo.Opt
		consumer         *kgo.Client
		prod, cons       []time.Duration // per round
		start            []time.Duration // per round: a new producer's login and first record
		prodSum, consSum time.Duration
		user, pw         string          // HTTP Basic ("" on the plain side)
		hprod, hcons     []time.Duration // per round, HTTP door
	}
	sides := []*side{{node: plain}, {node: secure, opts: []kgo.Opt{login}, user: "bench", pw: "bench-pw"}}
	hc := &http.Client{Timeout: time.Minute}
	for _, s := range sides {
		runnelTopicAs(b, s.node, "bench-auth", admin)
		runnelTopicAs(b, s.node, "bench-read", admin)
		if _, _, err := produceTimed(s.node.KafkaAddr, "bench-read", perOp, values, s.opts...); err != nil {
			b.Fatal(err)
		}
		s.consumer = newBenchConsumer(b, s.node.KafkaAddr, "bench-read", s.opts...)
		readPasses(b, s.consumer, "bench-read", perOp, 1) // logged in, connections open, warm
		runnelTopicAs(b, s.node, "bench-http", admin)
		if _, err := httpProduce(hc, s.node.URL, "bench-http", s.user, s.pw, httpPosts, httpBatch); err != nil { // what the reads read
			b.Fatal(err)
		}
	}
	b.SetBytes(perOp * 1024 * (1 + consumePasses) * 2 * rounds)
	b.ResetTimer()
	for i := range b.N * rounds {
		order := sides
		if i%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			start, d, err := produceTimed(s.node.KafkaAddr, "bench-auth", perOp, values, s.opts...)
			if err != nil {
				b.Fatal(err)
			}
			s.prod, s.start = append(s.prod, d), append(s.start, start)
		}
		for _, s := range order {
			s.cons = append(s.cons, readPasses(b, s.consumer, "bench-read", perOp, consumePasses))
		}
		for _, s := range order {
			d, err := httpProduce(hc, s.node.URL, "bench-http", s.user, s.pw, httpPosts, httpBatch)
			if err != nil {
				b.Fatal(err)
			}
			s.hprod = append(s.hprod, d)
		}
		for _, s := range order {
			d, err := httpConsume(hc, s.node.URL, "bench-http", s.user, s.pw, httpPosts*httpBatch, httpRead)
			if err != nil {
				b.Fatal(err)
			}
			s.hcons = append(s.hcons, d)
		}
	}
	b.StopTimer()
	for _, s := range sides {
		s.consumer.Close()
		for i := range s.prod {
			s.prodSum += s.prod[i]
			s.consSum += s.cons[i]
		}
	}
	mbps := func(d time.Duration, passes int) float64 {
		return float64(b.N*rounds*perOp*1024*passes) / d.Seconds() / 1e6
	}
	ratios := func(pick func(*side) []time.Duration) float64 {
		p, a := pick(sides[0]), pick(sides[1])
		r := make([]float64, len(p))
		for i := range p {
			r[i] = p[i].Seconds() / a[i].Seconds()
		}
		return median(r)
	}
	medianMs := func(ds []time.Duration) float64 {
		f := make([]float64, len(ds))
		for i, d := range ds {
			f[i] = float64(d) / float64(time.Millisecond)
		}
		return median(f)
	}
	b.ReportMetric(mbps(sides[0].prodSum, 1), "plain-produce-MB/s")
	b.ReportMetric(mbps(sides[1].prodSum, 1), "auth-produce-MB/s")
	b.ReportMetric(mbps(sides[0].consSum, consumePasses), "plain-consume-MB/s")
	b.ReportMetric(mbps(sides[1].consSum, consumePasses), "auth-consume-MB/s")
	b.ReportMetric(ratios(func(s *side) []time.Duration { return s.prod }), "produce-ratio")
	b.ReportMetric(ratios(func(s *side) []time.Duration { return s.cons }), "consume-ratio")
	b.ReportMetric(ratios(func(s *side) []time.Duration { return s.hprod }), "http-produce-ratio")
	b.ReportMetric(ratios(func(s *side) []time.Duration { return s.hcons }), "http-consume-ratio")
	b.ReportMetric(medianMs(sides[0].start), "plain-client-start-ms")
	b.ReportMetric(medianMs(sides[1].start), "auth-client-start-ms")
	for i := range sides[0].prod {
		r := func(pick func(*side) []time.Duration) string {
			p, a := pick(sides[0])[i], pick(sides[1])[i]
			return fmt.Sprintf("%v plain, %v auth (%.2fx)", p.Round(time.Millisecond), a.Round(time.Millisecond), p.Seconds()/a.Seconds())
		}
		b.Logf("round %d: kafka produce %s; kafka consume %s; http produce %s; http consume %s", i,
			r(func(s *side) []time.Duration { return s.prod }), r(func(s *side) []time.Duration { return s.cons }),
			r(func(s *side) []time.Duration { return s.hprod }), r(func(s *side) []time.Duration { return s.hcons }))
	}
}

// produceTimed produces n records (cycling through values) with a new
// franz-go client (defaults) and returns how long its start took (login,
// metadata, producer id and the first record, acknowledged) and how long
// the other n-1 took to be produced and flushed.
func produceTimed(addr, topic string, n int, values [][]byte, opts ...kgo.Opt) (start, took time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.SliceRecord(values[0])).FirstErr(); err != nil {
		return 0, 0, err
	}
	start = time.Since(t0)
	t1 := time.Now()
	failed := make(chan error, 1)
	for i := range n - 1 {
		cl.Produce(ctx, kgo.SliceRecord(values[(i+1)%len(values)]), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, err
	}
	select {
	case err := <-failed:
		return 0, 0, err
	default:
	}
	return start, time.Since(t1), nil
}

// httpProduce sends posts POST /records of batch 1 KiB records each, one
// after the other on one kept-alive connection, with Basic credentials
// when user is set, and returns how long they took.
func httpProduce(hc *http.Client, base, topic, user, pw string, posts, batch int) (time.Duration, error) {
	bodies := make([][]byte, 16)
	for i := range bodies {
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for j := range batch {
			if j > 0 {
				sb.WriteByte(',')
			}
			v := make([]byte, 1024)
			for k := range v {
				v[k] = 'a' + byte(rand.IntN(26))
			}
			fmt.Fprintf(&sb, `{"value":%q}`, v)
		}
		sb.WriteString(`]}`)
		bodies[i] = []byte(sb.String())
	}
	start := time.Now()
	for i := range posts {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/topics/"+topic+"/records?encoding=string", bytes.NewReader(bodies[i%len(bodies)]))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		if _, err := httpDo(hc, req); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// httpConsume reads the first n records of partition 0 of topic, read
// records per GET, and returns how long it took.
func httpConsume(hc *http.Client, base, topic, user, pw string, n, read int) (time.Duration, error) {
	start := time.Now()
	for off := int64(0); off < int64(n); {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/topics/%s/partitions/0/records?offset=%d&max_records=%d", base, topic, off, read), nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		body, err := httpDo(hc, req)
		if err != nil {
			return 0, err
		}
		var res struct {
			NextOffset int64 `json:"next_offset"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			return 0, err
		}
		if res.NextOffset <= off {
			return 0, fmt.Errorf("read from %d: next offset %d", off, res.NextOffset)
		}
		off = res.NextOffset
	}
	return time.Since(start), nil
}

func httpDo(hc *http.Client, req *http.Request) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %.200s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
	return body, err
}

// newBenchConsumer reads partition 0 of topic from the start, without a group.
func newBenchConsumer(b *testing.B, addr, topic string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// readPasses reads the n records of partition 0 of topic passes times,
// going back to offset 0 before each pass, and returns how long it took.
// Offsets tell the passes apart: a pass ends at offset n-1.
func readPasses(b *testing.B, cl *kgo.Client, topic string, n, passes int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for range passes {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 0}}})
		for done := false; !done; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatalf("pass not read in time: %v", ctx.Err())
			}
			fs.EachError(func(_ string, p int32, err error) { b.Fatalf("fetch %d: %v", p, err) })
			fs.EachRecord(func(r *kgo.Record) { done = done || r.Offset == int64(n-1) })
		}
	}
	return time.Since(start)
}

// runnelTopicAs creates a 1-partition topic, as admin where the node wants logins.
func runnelTopicAs(b *testing.B, n *servertest.Node, topic, adminPwd string) {
	adminPost(b, n.URL+"/v1/topics", adminPwd, map[string]any{"name": topic, "partitions": 1})
}

// adminPost posts body as the bootstrap superuser and wants 201.
func adminPost(b *testing.B, url, pwd string, body any) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("admin", pwd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, out)
	}
}
