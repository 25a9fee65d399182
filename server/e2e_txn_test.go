package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"

	"github.com/runnel/runnel/recordbatch"
)

// Transaction markers come only from brokers: a client's control batch is
// INVALID_RECORD and WriteTxnMarkers on the client port is
// CLUSTER_AUTHORIZATION_FAILED; neither writes anything.
func TestTxnMarkersRefusedFromClients(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "tx", "partitions": 1}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)

	marker := recordbatch.BuildControl(recordbatch.Marker{ProducerID: 1, ProducerEpoch: 0, Type: recordbatch.ControlAbort}, time.Now().UnixMilli())
	if r := rawProduce(t, conn, "tx", marker); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("client control batch: %v, want INVALID_RECORD", kerr.ErrorForCode(r.ErrorCode))
	}

	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed = 1, true
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = "tx", []int32{0}
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	resp := rawRoundTrip(t, conn, req).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers on the client port: %v", kerr.ErrorForCode(code))
	}
	if end := httpEndOffset(t, n, "tx", 0); end != 0 {
		t.Fatalf("end offset %d after refused markers, want 0", end)
	}
}

// readValues consumes topic from the start with a new client at isolation
// until it has read last, and returns the values read.
func readValues(ctx context.Context, t *testing.T, addr, topic string, iso kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) == 0 || got[len(got)-1] != last {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v, waiting for %s: %v", got, last, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// rawFetchCommitted is a read_committed Fetch of topic-0 at offset 0.
func rawFetchCommitted(t *testing.T, conn net.Conn, topic string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = -1, 1<<20, 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawRoundTrip(t, conn, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// rawListLatest answers ListOffsets latest at the isolation level.
func rawListLatest(t *testing.T, conn net.Conn, topic string, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID, req.IsolationLevel = -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rawRoundTrip(t, conn, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// beginTxn begins a transaction on tx and produces values to its default
// topic, one record each, in order.
func beginTxn(ctx context.Context, t testing.TB, tx *kgo.Client, values ...string) {
	t.Helper()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// endTxn commits (or aborts) tx's transaction.
func endTxn(ctx context.Context, t testing.TB, tx *kgo.Client, commit bool) {
	t.Helper()
	if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// runTxn is one whole transaction of values, committed or aborted.
func runTxn(ctx context.Context, t testing.TB, tx *kgo.Client, commit bool, values ...string) {
	t.Helper()
	beginTxn(ctx, t, tx, values...)
	endTxn(ctx, t, tx, commit)
}

// read_committed over a real node with franz-go's transactional
// producer: the last stable offset stops readers at an open transaction
// (Fetch and ListOffsets), Fetch names the aborted transaction, and
// franz-go read_committed consumers never see aborted records while
// read_uncommitted ones see everything; HTTP partition reads, the SSE
// stream and group member polls do the same with isolation (default
// read_committed), the server dropping aborted records and markers.
func TestTxnReadCommittedKafkaAndHTTP(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "txr", "partitions": 1}, 201, nil)

	tx, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("txr"), kgo.TransactionalID("txr-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	runTxn(ctx, t, tx, true, "c1", "c2", "c3")
	runTxn(ctx, t, tx, false, "a1", "a2")
	// An open transaction, then a plain record after it.
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("txr"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Offsets: c1-c3 0-2, commit 3, a1-a2 4-5, abort 6, o1 7, p1 8.
	conn := rawDial(t, n.KafkaAddr)
	if lso, hw := rawListLatest(t, conn, "txr", 1), rawListLatest(t, conn, "txr", 0); lso != 7 || hw != 9 {
		t.Fatalf("latest offsets: read_committed %d, read_uncommitted %d; want 7 and 9", lso, hw)
	}
	p := rawFetchCommitted(t, conn, "txr")
	if p.ErrorCode != 0 || p.LastStableOffset != 7 || p.HighWatermark != 9 {
		t.Fatalf("read_committed fetch: %v, LSO %d, HW %d", kerr.ErrorForCode(p.ErrorCode), p.LastStableOffset, p.HighWatermark)
	}
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].FirstOffset != 4 {
		t.Fatalf("aborted transactions %+v, want one from offset 4", p.AbortedTransactions)
	}
	var rb kmsg.RecordBatch
	for b := p.RecordBatches; len(b) > 0; b = b[12+int(rb.Length):] {
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.FirstOffset >= 7 {
			t.Fatalf("read_committed fetch returned a batch at %d, past the LSO 7", rb.FirstOffset)
		}
	}

	// DescribeProducers shows the open transaction and the coordinator
	// epoch of the producer's last marker.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = "txr", []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	var txnProducer *kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	dpp := rawRoundTrip(t, conn, dp).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	for i, ap := range dpp.ActiveProducers {
		if ap.CurrentTxnStartOffset >= 0 {
			txnProducer = &dpp.ActiveProducers[i]
		}
	}
	if dpp.ErrorCode != 0 || txnProducer == nil || txnProducer.CurrentTxnStartOffset != 7 || txnProducer.CoordinatorEpoch < 0 {
		t.Fatalf("describe producers: %v %+v", kerr.ErrorForCode(dpp.ErrorCode), dpp.ActiveProducers)
	}

	// HTTP: the server drops aborted records and markers itself.
	committed, uncommitted := []string{"c1", "c2", "c3"}, []string{"c1", "c2", "c3", "a1", "a2", "o1", "p1"}
	for _, tc := range []struct {
		query string
		want  []string
		next  int64
	}{{"", committed, 7}, {"&isolation=read_committed", committed, 7}, {"&isolation=read_uncommitted", uncommitted, 9}} {
		if got, next := httpValues(t, c, "/v1/topics/txr/partitions/0/records?offset=0&encoding=string"+tc.query); !slices.Equal(got, tc.want) || next != tc.next {
			t.Fatalf("HTTP consume%s: %v next %d, want %v next %d", tc.query, got, next, tc.want, tc.next)
		}
	}
	if got, next := httpValues(t, c, "/v1/topics/txr/partitions/0/records?offset=latest"); len(got) != 0 || next != 7 {
		t.Fatalf("read_committed offset=latest starts at %d, want the LSO 7", next)
	}
	c.problem("GET", "/v1/topics/txr/partitions/0/records?isolation=serializable", "", nil, 400, "")

	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	committed = []string{"c1", "c2", "c3", "o1", "p1"}
	if got := readValues(ctx, t, n.KafkaAddr, "txr", kgo.ReadCommitted(), "p1"); !slices.Equal(got, committed) {
		t.Fatalf("read_committed read %v, want %v", got, committed)
	}
	if got := readValues(ctx, t, n.KafkaAddr, "txr", kgo.ReadUncommitted(), "p1"); !slices.Equal(got, uncommitted) {
		t.Fatalf("read_uncommitted read %v, want %v", got, uncommitted)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{{"", committed}, {"&isolation=read_uncommitted", uncommitted}} {
		if got, _ := httpValues(t, c, "/v1/topics/txr/partitions/0/records?offset=0&encoding=string"+tc.query); !slices.Equal(got, tc.want) {
			t.Fatalf("HTTP consume%s: %v, want %v", tc.query, got, tc.want)
		}
		if got := sseValues(ctx, t, n, "/v1/topics/txr/records/stream?offset=earliest&encoding=string"+tc.query, "p1"); !slices.Equal(got, tc.want) {
			t.Fatalf("SSE%s: %v, want %v", tc.query, got, tc.want)
		}
		if got := groupValues(t, c, "g"+tc.query, "txr", tc.query, "p1"); !slices.Equal(got, tc.want) {
			t.Fatalf("group poll%s: %v, want %v", tc.query, got, tc.want)
		}
	}
}

// httpValues is one HTTP consume: the values and next_offset.
func httpValues(t *testing.T, c *apiClient, path string) ([]string, int64) {
	t.Helper()
	var res consumePage
	c.json("GET", path, nil, 200, &res)
	var out []string
	for _, r := range res.Records {
		v, _ := r.Value.(string) // encoding=string
		out = append(out, v)
	}
	return out, res.NextOffset
}

// sseValues reads the SSE stream at path until an event with value last.
func sseValues(ctx context.Context, t *testing.T, n *servertest.Node, path, last string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", n.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var rec struct {
			Value string `json:"value"`
		}
		if err := json.Unmarshal([]byte(data), &rec); err != nil {
			t.Fatalf("SSE data %q: %v", data, err)
		}
		if out = append(out, rec.Value); rec.Value == last {
			return out
		}
	}
	t.Fatalf("SSE ended after %v: %v", out, sc.Err())
	return nil
}

// groupValues joins an HTTP group member to topic and polls (with query)
// until it reads last.
func groupValues(t *testing.T, c *apiClient, group, topic, query, last string) []string {
	t.Helper()
	var join api.GroupMembership
	group = url.PathEscape(group)
	c.json("POST", "/v1/groups/"+group+"/members", map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest"}, 200, &join)
	var out []string
	for range 100 {
		var res client.GroupPollResponse
		c.json("GET", "/v1/groups/"+group+"/members/"+url.PathEscape(join.MemberID)+"/records?wait_ms=500&encoding=string"+query, nil, 200, &res)
		for _, r := range res.Records {
			v, _ := r.Value.(string) // encoding=string
			if out = append(out, v); v == last {
				return out
			}
		}
	}
	t.Fatalf("group poll read %v, never %s", out, last)
	return nil
}

// The log side of transactions survives restarts: after a clean stop and
// after kill -9 (recovery replays the unflushed tail), the last stable
// offset still stops at the open transaction and Fetch still names the
// aborted one.
func TestTxnStateSurvivesRestart(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "txs", "partitions": 1}, 201, nil)
	tx, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("txs"), kgo.TransactionalID("txs-producer"),
		kgo.TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for _, commit := range []bool{true, false} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}, &kgo.Record{Value: []byte("w")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Offsets: v w 0-1, commit 2, v w 3-4, abort 5, open 6.
	check := func(when string, end int64) {
		t.Helper()
		conn := rawDial(t, n.KafkaAddr)
		defer conn.Close()
		if lso, hw := rawListLatest(t, conn, "txs", 1), rawListLatest(t, conn, "txs", 0); lso != 6 || hw != end {
			t.Fatalf("%s: read_committed latest %d, read_uncommitted %d; want 6 and %d", when, lso, hw, end)
		}
		p := rawFetchCommitted(t, conn, "txs")
		if p.ErrorCode != 0 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].FirstOffset != 3 {
			t.Fatalf("%s: read_committed fetch %v, aborted %+v", when, kerr.ErrorForCode(p.ErrorCode), p.AbortedTransactions)
		}
		if got, next := httpValues(t, c, "/v1/topics/txs/partitions/0/records?offset=0&encoding=string"); !slices.Equal(got, []string{"v", "w"}) || next != 6 {
			t.Fatalf("%s: HTTP read_committed %v next %d", when, got, next)
		}
	}
	check("before restart", 7)
	n.Stop()
	n.Start()
	check("after a clean restart", 7)
	// A write after the restart makes the log dirty, so the next start
	// recovers it (replaying the transactions from the recovery point).
	c.json("POST", "/v1/topics/txs/records", map[string]any{"records": []map[string]any{{"value": "plain", "partition": 0}}}, 200, nil)
	n.Kill()
	n.Start()
	check("after kill -9", 8)
}
