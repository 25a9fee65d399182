package server_test

// Kafka end-to-end tests that cross into the HTTP API or drive the wire
// protocol by hand: cross-protocol records, idempotent replay, long polling,
// several nodes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"
)

type crossRecord struct {
	partition  int32
	key, value []byte
	header     []byte
	timestamp  int64
}

func randomRecords(n int, partitions int32) []crossRecord {
	rng := rand.New(rand.NewPCG(7, 11))
	bytesN := func(max int) []byte {
		b := make([]byte, rng.IntN(max)+1)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	base := time.Now().Add(-time.Hour).UnixMilli()
	out := make([]crossRecord, n)
	for i := range out {
		out[i] = crossRecord{partition: int32(i) % partitions, key: bytesN(20), value: bytesN(300),
			header: bytesN(10), timestamp: base + int64(i)}
	}
	return out
}

// TestKafkaHTTPCrossProtocol: records produced over HTTP are read
// byte-identical by a Kafka client, and records produced by a Kafka client
// are read byte-identical over HTTP (keys, values, headers, timestamps).
func TestKafkaHTTPCrossProtocol(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("http to kafka", func(t *testing.T) {
		httpCreateTopic(t, n, "from-http", 2)
		recs := randomRecords(200, 2)
		var body client.ProduceRequest
		for _, r := range recs {
			key, value, h := b64(r.key), b64(r.value), b64(r.header)
			body.Records = append(body.Records, client.ProduceRecord{Partition: &r.partition, Timestamp: &r.timestamp,
				Key: &key, Value: value, Headers: &map[string]*string{"h": &h}})
		}
		b, _ := json.Marshal(body)
		resp, err := http.Post(n.URL+"/v1/topics/from-http/records?encoding=base64", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("produce: %d %s", resp.StatusCode, out)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ConsumeTopics("from-http"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		next := map[int32]int{0: 0, 1: 1} // index into recs, per partition
		for got := 0; got < len(recs); {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d", got, len(recs))
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %d: %v", p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				want := recs[next[r.Partition]]
				next[r.Partition] += 2
				got++
				if !bytes.Equal(r.Key, want.key) || !bytes.Equal(r.Value, want.value) || len(r.Headers) != 1 ||
					r.Headers[0].Key != "h" || !bytes.Equal(r.Headers[0].Value, want.header) || r.Timestamp.UnixMilli() != want.timestamp {
					t.Fatalf("partition %d offset %d differs from what HTTP produced", r.Partition, r.Offset)
				}
			})
		}
	})

	t.Run("kafka to http", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("from-kafka"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		kafkaCreateTopic(ctx, t, cl, "from-kafka", 2)
		recs := randomRecords(200, 2)
		var krecs []*kgo.Record
		for _, r := range recs {
			krecs = append(krecs, &kgo.Record{Partition: r.partition, Key: r.key, Value: r.value,
				Headers: []kgo.RecordHeader{{Key: "h", Value: r.header}}, Timestamp: time.UnixMilli(r.timestamp)})
		}
		if err := cl.ProduceSync(ctx, krecs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			var got consumePage
			httpGetJSON(t, fmt.Sprintf("%s/v1/topics/from-kafka/partitions/%d/records?offset=earliest&max_records=1000&encoding=base64", n.URL, p), &got)
			if len(got.Records) != 100 {
				t.Fatalf("partition %d: HTTP read %d records", p, len(got.Records))
			}
			for i, r := range got.Records {
				want := recs[2*i+int(p)]
				if r.Offset != int64(i) || r.Key == nil || *r.Key != b64(want.key) || r.Value != b64(want.value) ||
					r.Headers["h"] == nil || *r.Headers["h"] != b64(want.header) || r.Timestamp != want.timestamp {
					t.Fatalf("partition %d offset %d differs from what Kafka produced: %+v", p, r.Offset, r)
				}
			}
		}
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestKafkaIdempotentReplay: an idempotent producer's batch replayed on a new
// connection after the first one dropped is acknowledged with its original
// offset and stored once; a sequence gap is refused.
func TestKafkaIdempotentReplay(t *testing.T) {
	n := kafkaNode(t)
	httpCreateTopic(t, n, "idem", 1)

	c1 := rawDial(t, n.KafkaAddr)
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.Version = 4
	ip := rawRoundTrip(t, c1, initReq).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 || ip.ProducerID < 0 {
		t.Fatalf("InitProducerId: %+v", ip)
	}
	first := rawBatch(5, ip.ProducerID, ip.ProducerEpoch, 0)
	r1 := rawProduce(t, c1, "idem", first)
	if r1.ErrorCode != 0 {
		t.Fatalf("first produce: %s", kerr.ErrorForCode(r1.ErrorCode))
	}
	c1.Close() // the connection drops before the client saw... anything more

	c2 := rawDial(t, n.KafkaAddr)
	replay := rawProduce(t, c2, "idem", first)
	if replay.ErrorCode != 0 || replay.BaseOffset != r1.BaseOffset {
		t.Fatalf("replay: error %v offset %d, want offset %d", kerr.ErrorForCode(replay.ErrorCode), replay.BaseOffset, r1.BaseOffset)
	}
	second := rawProduce(t, c2, "idem", rawBatch(5, ip.ProducerID, ip.ProducerEpoch, 5))
	if second.ErrorCode != 0 || second.BaseOffset != r1.BaseOffset+5 {
		t.Fatalf("next batch: error %v offset %d", kerr.ErrorForCode(second.ErrorCode), second.BaseOffset)
	}
	gap := rawProduce(t, c2, "idem", rawBatch(5, ip.ProducerID, ip.ProducerEpoch, 50))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: error %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(gap.ErrorCode))
	}
	if end := httpEndOffset(t, n, "idem", 0); end != 10 {
		t.Fatalf("end offset %d, want 10 (the replayed batch stored once)", end)
	}

	// The sequence state is rebuilt from the log after a restart.
	n.Stop()
	n.Start()
	c3 := rawDial(t, n.KafkaAddr)
	again := rawProduce(t, c3, "idem", rawBatch(5, ip.ProducerID, ip.ProducerEpoch, 5))
	if again.ErrorCode != 0 || again.BaseOffset != second.BaseOffset {
		t.Fatalf("replay after restart: error %v offset %d, want offset %d", kerr.ErrorForCode(again.ErrorCode), again.BaseOffset, second.BaseOffset)
	}
	third := rawProduce(t, c3, "idem", rawBatch(5, ip.ProducerID, ip.ProducerEpoch, 10))
	if third.ErrorCode != 0 || third.BaseOffset != second.BaseOffset+5 {
		t.Fatalf("next batch after restart: error %v offset %d", kerr.ErrorForCode(third.ErrorCode), third.BaseOffset)
	}
	if end := httpEndOffset(t, n, "idem", 0); end != 15 {
		t.Fatalf("end offset after restart %d, want 15", end)
	}
}

func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var rawFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("runnel-e2e-raw"))

// rawRoundTrip writes one request and reads its response.
func rawRoundTrip(t *testing.T, c net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(rawFormatter.AppendRequest(nil, req, 99)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(body) != 99 {
		t.Fatal("wrong correlation id")
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

func rawProduce(t *testing.T, c net.Conn, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rawRoundTrip(t, c, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// rawBatch encodes an uncompressed RecordBatch v2 for an idempotent producer.
func rawBatch(n int, pid int64, epoch int16, seq int32) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i := range n {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Key, r.Value = []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("seq-%d", int(seq)+i))
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after the (1-byte, zero) length
		records = r.AppendTo(records)
	}
	b := kmsg.NewRecordBatch()
	b.Magic, b.LastOffsetDelta, b.NumRecords = 2, int32(n-1), int32(n)
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, seq
	b.Records = records
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestKafkaMultiNode: on a three-node cluster, Metadata from any node lists
// every broker at its Kafka address and the partition leaders; franz-go,
// seeded with one node, produces to and consumes from partitions led by
// all of them; a produce sent to a node that does not lead the partition
// gets NOT_LEADER_OR_FOLLOWER.
func TestKafkaMultiNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Nodes[1].KafkaAddr), kgo.DefaultProduceTopic("spread"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, "spread", 6)

	leaders := map[int32]int32{}
	servertest.WaitFor(t, 30*time.Second, "every node to see all brokers and leaders", func() bool {
		for _, n := range c.Nodes {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("spread")
			req.Topics = append(req.Topics, rt)
			resp := rawRoundTrip(t, rawDial(t, n.KafkaAddr), req).(*kmsg.MetadataResponse)
			if len(resp.Brokers) != 3 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 6 {
				return false
			}
			for _, b := range resp.Brokers {
				if want := c.Nodes[b.NodeID-1].KafkaAddr; net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != want {
					t.Fatalf("broker %d advertised at %s:%d, listens on %s", b.NodeID, b.Host, b.Port, want)
				}
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 1 {
					return false
				}
				leaders[p.Partition] = p.Leader
			}
		}
		return true
	})
	distinct := map[int32]bool{}
	for _, l := range leaders {
		distinct[l] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("all six partitions led by one broker: %v", leaders)
	}

	const n = 3000
	for i := range n {
		r := &kgo.Record{Key: []byte(e2eKey(i)), Value: []byte(e2eValue(i)),
			Headers: []kgo.RecordHeader{{Key: "idx", Value: []byte(strconv.Itoa(i))}}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil || t.Failed() {
		t.Fatalf("flush: %v", err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Nodes[2].KafkaAddr), kgo.ConsumeTopics("spread"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	check := newOrderCheck(t)
	for read := 0; read < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d", read, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read++
			check.record(r.Partition, string(r.Key), string(r.Value), string(r.Headers[0].Value))
		})
	}
	check.done(n)

	// Partition 0 sent straight to a node that does not lead it.
	var other *servertest.Node
	for i, node := range c.Nodes {
		if int32(i+1) != leaders[0] {
			other = node
		}
	}
	resp := rawProduce(t, rawDial(t, other.KafkaAddr), "spread", rawBatch(1, -1, -1, -1))
	if resp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestKafkaLongPollWakesOnHTTPProduce: a Kafka fetch waiting with a long
// MaxWait is answered as soon as a record is produced over HTTP.
func TestKafkaLongPollWakesOnHTTPProduce(t *testing.T) {
	n := kafkaNode(t)
	httpCreateTopic(t, n, "wake", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ConsumeTopics("wake"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The poll gives up long before MaxWait: only a woken fetch returns data.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	polled := make(chan kgo.Fetches, 1)
	go func() { polled <- cl.PollFetches(ctx) }()
	time.Sleep(500 * time.Millisecond) // let the fetch reach the server and wait
	resp, err := http.Post(n.URL+"/v1/topics/wake/records?encoding=string", "application/json",
		strings.NewReader(`{"records":[{"key":"k","value":"wake up","partition":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fs := <-polled
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "wake up" || string(recs[0].Key) != "k" {
		t.Fatalf("records %v, errors %v (context: %v)", recs, fs.Errors(), ctx.Err())
	}
}

// TestKafkaAPIVersionsMatchHTTP: what ApiVersions advertises on the wire is
// what GET /v1/kafka/api-versions lists; an ApiVersions version the
// listener does not speak is answered in v0 with UNSUPPORTED_VERSION and
// the same list.
func TestKafkaAPIVersionsMatchHTTP(t *testing.T) {
	n := kafkaNode(t)
	var httpList api.KafkaAPIVersions
	httpGetJSON(t, n.URL+"/v1/kafka/api-versions", &httpList)
	want := map[int16][2]int16{}
	for _, v := range httpList.APIVersions {
		want[v.APIKey] = [2]int16{v.MinVersion, v.MaxVersion}
	}
	compare := func(resp *kmsg.ApiVersionsResponse) {
		t.Helper()
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ApiVersions on the wire %v, HTTP lists %v", got, want)
		}
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "e2e", "1"
	resp := rawRoundTrip(t, rawDial(t, n.KafkaAddr), req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	compare(resp)

	// v5 is newer than the listener: the answer comes in v0.
	c := rawDial(t, n.KafkaAddr)
	req.Version = 5
	if _, err := c.Write(rawFormatter.AppendRequest(nil, req, 99)); err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.Version = 0
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	old := v0.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := old.ReadFrom(body[4:]); err != nil || old.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions v5 answered %+v (%v)", old, err)
	}
	compare(old)
}
