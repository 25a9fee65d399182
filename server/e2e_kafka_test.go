package server_test

// End-to-end tests of the Kafka listener: real clients (franz-go, sarama,
// kcat, kafkajs) against a real runnel process started by servertest, and
// cross-protocol checks against the HTTP API with plain net/http.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

const e2eRecords = 10_000

// e2eRecord is what every client test produces: record i has a key that
// repeats every 50 records and an index header, so order and content can
// be checked after the round trip.
func e2eKey(i int) string   { return "key-" + strconv.Itoa(i%50) }
func e2eValue(i int) string { return fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%64)) }

// orderCheck checks records read back: each index once, increasing within
// a partition, content as produced.
type orderCheck struct {
	t    *testing.T
	last map[int32]int
	seen map[int]bool
}

func newOrderCheck(t *testing.T) *orderCheck {
	return &orderCheck{t: t, last: map[int32]int{}, seen: map[int]bool{}}
}

func (c *orderCheck) record(partition int32, key, value, idxHeader string) {
	c.t.Helper()
	i, err := strconv.Atoi(idxHeader)
	if err != nil {
		c.t.Fatalf("partition %d: bad idx header %q", partition, idxHeader)
	}
	if key != e2eKey(i) || value != e2eValue(i) {
		c.t.Fatalf("record %d: key %q value %q", i, key, value)
	}
	if last, ok := c.last[partition]; ok && i <= last {
		c.t.Fatalf("partition %d: record %d after %d", partition, i, last)
	}
	if c.seen[i] {
		c.t.Fatalf("record %d read twice", i)
	}
	c.last[partition], c.seen[i] = i, true
}

func (c *orderCheck) done(n int) {
	c.t.Helper()
	if len(c.seen) != n {
		c.t.Fatalf("read %d distinct records, produced %d", len(c.seen), n)
	}
}

// kafkaNode starts one runnel node with its Kafka listener.
func kafkaNode(t *testing.T) *servertest.Node {
	t.Helper()
	n := servertest.Start(t, servertest.Options{})
	if n.KafkaAddr == "" {
		t.Fatal("node has no Kafka listener")
	}
	return n
}

func TestKafkaFranzGo(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.DefaultProduceTopic("franz"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafkaCreateTopic(ctx, t, cl, "franz", 4)

	// franz-go defaults: idempotent, snappy, pipelined requests.
	for i := range e2eRecords {
		r := &kgo.Record{Key: []byte(e2eKey(i)), Value: []byte(e2eValue(i)),
			Headers: []kgo.RecordHeader{{Key: "idx", Value: []byte(strconv.Itoa(i))}, {Key: "client", Value: []byte("franz-go")}}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	check := newOrderCheck(t)
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ConsumeTopics("franz"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for read := 0; read < e2eRecords; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d: %v", read, e2eRecords, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read++
			check.record(r.Partition, string(r.Key), string(r.Value), string(r.Headers[0].Value))
		})
	}
	check.done(e2eRecords)
}

// kafkaCreateTopic creates a topic with a CreateTopics request.
func kafkaCreateTopic(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func TestKafkaSarama(t *testing.T) {
	n := kafkaNode(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.AllowAutoTopicCreation = false

	admin, err := sarama.NewClusterAdmin([]string{n.KafkaAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("sarama", &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	prod, err := sarama.NewSyncProducer([]string{n.KafkaAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const batch = 500
	for start := 0; start < e2eRecords; start += batch {
		var msgs []*sarama.ProducerMessage
		for i := start; i < start+batch; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: "sarama", Key: sarama.StringEncoder(e2eKey(i)),
				Value:   sarama.StringEncoder(e2eValue(i)),
				Headers: []sarama.RecordHeader{{Key: []byte("idx"), Value: []byte(strconv.Itoa(i))}}})
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatal(err)
		}
	}

	cons, err := sarama.NewConsumer([]string{n.KafkaAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	parts, err := cons.Partitions("sarama")
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions %v: %v", parts, err)
	}
	check := newOrderCheck(t)
	total := 0
	for _, p := range parts {
		end := saramaEndOffset(t, n.KafkaAddr, cfg, p)
		pc, err := cons.ConsumePartition("sarama", p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for next := int64(0); next < end; {
			select {
			case m := <-pc.Messages():
				if m.Offset != next {
					t.Fatalf("partition %d: offset %d, want %d", p, m.Offset, next)
				}
				next++
				check.record(p, string(m.Key), string(m.Value), string(m.Headers[0].Value))
			case err := <-pc.Errors():
				t.Fatalf("partition %d: %v", p, err)
			case <-time.After(30 * time.Second):
				t.Fatalf("partition %d: stuck at offset %d of %d", p, next, end)
			}
		}
		pc.Close()
		total += int(end)
	}
	if total != e2eRecords {
		t.Fatalf("end offsets add up to %d, produced %d", total, e2eRecords)
	}
	check.done(e2eRecords)
}

func saramaEndOffset(t *testing.T, addr string, cfg *sarama.Config, p int32) int64 {
	t.Helper()
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	end, err := client.GetOffset("sarama", p, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// TestKafkaKcat produces and consumes with kcat (librdkafka), once per
// compression codec.
func TestKafkaKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		servertest.MissingTool(t, "kcat not installed")
	}
	n := kafkaNode(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			httpCreateTopic(t, n, topic, 3)
			var in bytes.Buffer
			for i := range e2eRecords {
				fmt.Fprintf(&in, "%s\t%s|%d\n", e2eKey(i), e2eValue(i), i)
			}
			kcat(t, &in, "-b", n.KafkaAddr, "-P", "-t", topic, "-K", "\t", "-z", codec,
				"-H", "codec="+codec, "-X", "enable.idempotence=true")
			out := kcat(t, nil, "-b", n.KafkaAddr, "-C", "-t", topic, "-e", "-q",
				"-f", "%p\t%o\t%k\t%s\t%h\n")
			check := newOrderCheck(t)
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				f := strings.Split(sc.Text(), "\t")
				if len(f) != 5 || f[4] != "codec="+codec {
					t.Fatalf("kcat line %q", sc.Text())
				}
				p, _ := strconv.Atoi(f[0])
				value, idx, _ := strings.Cut(f[3], "|")
				check.record(int32(p), f[2], value, idx)
			}
			check.done(e2eRecords)
		})
	}
}

func kcat(t *testing.T, stdin io.Reader, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if rest := withoutUncompressedNotice(stderr.String()); err != nil || rest != "" {
		t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// withoutUncompressedNotice drops librdkafka's notice that it sends a
// gzip, snappy or lz4 batch uncompressed: librdkafka 2.0 (Debian 12's
// kcat) compresses those codecs only for a broker that accepts Produce
// v0, which runnel, like Kafka 4.0 (KIP-896), does not (zstd, which needs
// v7, it compresses). It says so once a day by the host's monotonic
// clock, so the test passed on a machine up for less than a day and failed
// on one up longer; the records still go through and are checked.
func withoutUncompressedNotice(stderr string) string {
	var rest strings.Builder
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, "|COMPRESSION|") || !strings.Contains(line, "Broker does not support compression type") {
			rest.WriteString(line)
		}
	}
	return rest.String()
}

// TestKafkaKafkajs runs testdata/kafkajs/roundtrip.js: kafkajs creates a
// topic, produces idempotently (plain and gzip batches) and reads back.
func TestKafkaKafkajs(t *testing.T) {
	dir := filepath.Join("testdata", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		servertest.MissingTool(t, fmt.Sprintf("kafkajs not installed (npm ci in %s): %v", dir, err))
	}
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "roundtrip.js", n.KafkaAddr, "kafkajs", strconv.Itoa(e2eRecords))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kafkajs: %v\n%s", err, out)
	}
	var res struct{ Produced, Read, Partitions int }
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil || res.Read != e2eRecords || res.Partitions != 3 {
		t.Fatalf("kafkajs output %q: %v", out, err)
	}
	// The records are where runnel's HTTP API sees them too.
	total := int64(0)
	for p := range 3 {
		total += httpEndOffset(t, n, "kafkajs", p)
	}
	if total != e2eRecords {
		t.Fatalf("HTTP end offsets add up to %d", total)
	}
}

// httpCreateTopic creates a topic with POST /v1/topics.
func httpCreateTopic(t testing.TB, n *servertest.Node, topic string, partitions int) {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"partitions":%d,"replication_factor":1}`, topic, partitions)
	resp, err := http.Post(n.URL+"/v1/topics", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create topic %s: %d %s", topic, resp.StatusCode, b)
	}
}

func httpEndOffset(t *testing.T, n *servertest.Node, topic string, p int) int64 {
	t.Helper()
	var got api.TopicDetail
	httpGetJSON(t, n.URL+"/v1/topics/"+topic, &got)
	for _, gp := range got.Partitions {
		if int(gp.Partition) == p {
			return gp.EndOffset
		}
	}
	t.Fatalf("topic %s has no partition %d", topic, p)
	return 0
}

func httpGetJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// crossRecord is one record with arbitrary bytes, compared across protocols.
