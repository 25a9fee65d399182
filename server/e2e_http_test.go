package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

func TestHTTPTopicLifecycle(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)

	c.json("POST", "/v1/topics", map[string]any{"name": "orders", "partitions": 3, "configs": map[string]string{"retention.ms": "3600000"}}, 201, nil)
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"orders","partitions":3}`), 409, "topic-exists")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"bad/name","partitions":1}`), 400, "")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"..","partitions":1}`), 400, "")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"x",`), 400, "")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"cfg","partitions":1,"configs":{"retention.ms":"soon"}}`), 400, "invalid-config")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"cfg","partitions":1,"configs":{"no.such.config":"1"}}`), 400, "invalid-config")
	c.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"rf","partitions":1,"replication_factor":3}`), 400, "")

	var list api.TopicList
	c.json("GET", "/v1/topics", nil, 200, &list)
	if len(list.Topics) != 1 || list.Topics[0].Name != "orders" || list.Topics[0].Partitions != 3 || list.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("topics: %+v", list.Topics)
	}

	var detail api.TopicDetail
	c.json("GET", "/v1/topics/orders", nil, 200, &detail)
	if len(detail.Partitions) != 3 || detail.Configs["retention.ms"] != "3600000" || detail.Partitions[2].Leader != 1 ||
		len(detail.Partitions[0].ISR) != 1 {
		t.Fatalf("describe: %+v", detail)
	}

	c.json("PATCH", "/v1/topics/orders/configs", map[string]any{"configs": map[string]any{"retention.ms": "60000", "cleanup.policy": "compact"}}, 200, nil)
	c.problem("PATCH", "/v1/topics/orders/configs", "application/json", []byte(`{"configs":{"segment.bytes":"-5"}}`), 400, "invalid-config")
	c.json("GET", "/v1/topics/orders", nil, 200, &detail)
	if detail.Configs["retention.ms"] != "60000" || detail.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("configs after PATCH: %+v", detail.Configs)
	}

	c.problem("GET", "/v1/topics/nope", "", nil, 404, "unknown-topic")
	c.do("DELETE", "/v1/topics/orders", "", nil)
	c.problem("GET", "/v1/topics/orders", "", nil, 404, "unknown-topic")
	c.problem("DELETE", "/v1/topics/orders", "", nil, 404, "unknown-topic")

	// Re-created under the same name, the topic starts empty.
	c.json("POST", "/v1/topics", map[string]any{"name": "orders", "partitions": 1}, 201, nil)
	c.json("GET", "/v1/topics/orders", nil, 200, &detail)
	if detail.Partitions[0].EndOffset != 0 {
		t.Fatalf("re-created topic not empty: %+v", detail)
	}
}

func TestHTTPProduceConsume(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "events", "partitions": 4}, 201, nil)

	// Keyed records land where Kafka's default partitioner puts them.
	var recs []map[string]any
	for i := 0; i < 40; i++ {
		recs = append(recs, map[string]any{"key": fmt.Sprintf("user-%d", i), "value": map[string]any{"n": i},
			"headers": map[string]string{"source": "test"}})
	}
	var out producedOffsets
	c.json("POST", "/v1/topics/events/records", map[string]any{"records": recs}, 200, &out)
	if len(out.Offsets) != 40 {
		t.Fatalf("offsets: %+v", out)
	}
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("events")
	for i, o := range out.Offsets {
		want := ref.Partition(&kgo.Record{Key: []byte(fmt.Sprintf("user-%d", i))}, 4)
		if int(o.Partition) != want {
			t.Fatalf("record %d went to partition %d, Kafka's partitioner picks %d", i, o.Partition, want)
		}
	}

	// Read everything back, partition by partition, and check content and order.
	seen := 0
	for p := 0; p < 4; p++ {
		var got consumed
		c.json("GET", fmt.Sprintf("/v1/topics/events/partitions/%d/records?offset=earliest&max_records=100", p), nil, 200, &got)
		last := int64(-1)
		for _, r := range got.Records {
			if r.Offset <= last || r.Key == nil || r.Headers["source"] != "test" {
				t.Fatalf("partition %d: bad record %+v", p, r)
			}
			var v struct{ N int }
			if err := json.Unmarshal(r.Value, &v); err != nil || fmt.Sprintf("user-%d", v.N) != *r.Key {
				t.Fatalf("partition %d: value %s for key %s", p, r.Value, *r.Key)
			}
			last = r.Offset
			seen++
		}
		if got.NextOffset != got.HighWatermark || got.HighWatermark != last+1 {
			t.Fatalf("partition %d: next %d hwm %d last %d", p, got.NextOffset, got.HighWatermark, last)
		}
	}
	if seen != 40 {
		t.Fatalf("read %d records, produced 40", seen)
	}

	// Encodings and explicit partitions.
	c.json("POST", "/v1/topics/events/records?encoding=string", map[string]any{"records": []map[string]any{{"key": "k", "value": "plain text", "partition": 2}}}, 200, &out)
	if out.Offsets[0].Partition != 2 {
		t.Fatalf("explicit partition ignored: %+v", out)
	}
	strOff := out.Offsets[0].Offset
	c.json("POST", "/v1/topics/events/records?encoding=base64", map[string]any{"records": []map[string]any{{"value": "AAEC/w==", "partition": 2}}}, 200, &out)
	var got consumed
	c.json("GET", fmt.Sprintf("/v1/topics/events/partitions/2/records?offset=%d&encoding=base64", strOff), nil, 200, &got)
	if len(got.Records) != 2 || string(got.Records[1].Value) != `"AAEC/w=="` || string(got.Records[0].Value) != `"cGxhaW4gdGV4dA=="` {
		t.Fatalf("base64 round trip: %+v", got.Records)
	}
	c.json("GET", fmt.Sprintf("/v1/topics/events/partitions/2/records?offset=%d&encoding=string&max_records=1", strOff), nil, 200, &got)
	if len(got.Records) != 1 || string(got.Records[0].Value) != `"plain text"` || got.NextOffset != strOff+1 {
		t.Fatalf("string consume: %+v", got)
	}

	// NDJSON bulk produce.
	var nd bytes.Buffer
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&nd, `{"value":{"bulk":%d},"partition":1}`+"\n", i)
	}
	status, body := c.do("POST", "/v1/topics/events/records", "application/x-ndjson", nd.Bytes())
	if status != 200 {
		t.Fatalf("ndjson produce: %d %s", status, body)
	}
	json.Unmarshal(body, &out)
	if len(out.Offsets) != 100 || out.Offsets[99].Offset != out.Offsets[0].Offset+99 {
		t.Fatalf("ndjson offsets: %+v", out.Offsets[:2])
	}

	// Errors write nothing.
	endBefore := endOffsets(t, c, "events")
	c.problem("POST", "/v1/topics/events/records", "application/json", []byte(`{"records":[{"value":1,"partition":0},{"value":2,"partition":9}]}`), 404, "unknown-partition")
	c.problem("POST", "/v1/topics/events/records", "application/json", []byte(`{"records":[{"value":1,"partition":0},{"value":`), 400, "")
	c.problem("POST", "/v1/topics/nope/records", "application/json", []byte(`{"records":[{"value":1}]}`), 404, "unknown-topic")
	c.json("PATCH", "/v1/topics/events/configs", map[string]any{"configs": map[string]any{"max.message.bytes": "2000"}}, 200, nil)
	big := strings.Repeat("x", 3000)
	c.problem("POST", "/v1/topics/events/records?encoding=string", "application/json", []byte(`{"records":[{"value":"small","partition":0},{"value":"`+big+`","partition":0}]}`), 413, "")
	if after := endOffsets(t, c, "events"); fmt.Sprint(after) != fmt.Sprint(endBefore) {
		t.Fatalf("rejected requests wrote records: end offsets %v -> %v", endBefore, after)
	}
	c.problem("GET", "/v1/topics/events/partitions/0/records?offset=999999", "", nil, 416, "offset-out-of-range")
	c.problem("GET", "/v1/topics/events/partitions/7/records?offset=0", "", nil, 404, "unknown-partition")
}

func endOffsets(t *testing.T, c *apiClient, topic string) []int64 {
	t.Helper()
	var d api.TopicDetail
	c.json("GET", "/v1/topics/"+topic, nil, 200, &d)
	var out []int64
	for _, p := range d.Partitions {
		out = append(out, p.EndOffset)
	}
	return out
}

func TestHTTPLongPollWokenByProduce(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--http-max-long-polls", "1"}})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "tail", "partitions": 1}, 201, nil)

	// The poll asks for offset=latest, so it can only return a record that was
	// produced after it resolved "latest": getting one back means the produce
	// woke it. The produce is sent once the node counts the poll among its
	// long polls (startLongPoll); should it still land before the poll
	// resolved "latest", the poll ends empty and the round is repeated.
	for round := 0; round < 5; round++ {
		want := fmt.Sprintf(`"wake-%d"`, round)
		polled := startLongPoll(t, n, "/v1/topics/tail/partitions/0/records?offset=latest&wait_ms=10000")
		c.json("POST", "/v1/topics/tail/records", map[string]any{"records": []map[string]any{{"value": json.RawMessage(want)}}}, 200, nil)
		var got consumed
		if err := json.Unmarshal(<-polled, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Records) == 0 {
			t.Logf("round %d: the produce landed before the poll resolved latest; again", round)
			continue
		}
		if len(got.Records) != 1 || string(got.Records[0].Value) != want || got.NextOffset != int64(round)+1 {
			t.Fatalf("long poll returned %+v, want one record %s", got, want)
		}
		return
	}
	t.Fatal("no long poll was woken by a produce in 5 rounds")
}

// startLongPoll starts GET path, a waiting consume, on n, which runs with
// --http-max-long-polls 1, and returns once the poll holds the node's one
// long-poll slot: a probe poll is refused with 429 exactly then. The poll
// asks again while a probe holds the slot. The channel gets its 200 body.
func startLongPoll(t *testing.T, n *servertest.Node, path string) <-chan []byte {
	t.Helper()
	get := func(path string) (int, []byte) {
		resp, err := http.Get(n.URL + path)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	polled := make(chan []byte, 1)
	go func() {
		for range 1000 { // bounded: a probe holds the slot for a millisecond
			if status, body := get(path); status != http.StatusTooManyRequests {
				if status != http.StatusOK {
					body = []byte(fmt.Sprintf(`{"error":"status %d: %s"}`, status, body))
				}
				polled <- body
				return
			}
		}
		polled <- []byte(`{"error":"the poll never got the long-poll slot"}`)
	}()
	probe, _, _ := strings.Cut(path, "?")
	servertest.WaitFor(t, 30*time.Second, "the long poll to hold the node's one long-poll slot", func() bool {
		status, _ := get(probe + "?offset=latest&wait_ms=1")
		return status == http.StatusTooManyRequests
	})
	return polled
}

func TestRestartKeepsEverything(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "durable", "partitions": 2}, 201, nil)
	for i := 0; i < 10; i++ {
		c.json("POST", "/v1/topics/durable/records", map[string]any{"records": []map[string]any{{"value": i, "partition": i % 2}}}, 200, nil)
	}
	n.Stop()
	n.Start()
	for p := 0; p < 2; p++ {
		var got consumed
		c.json("GET", fmt.Sprintf("/v1/topics/durable/partitions/%d/records?offset=earliest", p), nil, 200, &got)
		if len(got.Records) != 5 {
			t.Fatalf("partition %d after restart: %d records", p, len(got.Records))
		}
	}
	// Still writable, offsets continue.
	var out producedOffsets
	c.json("POST", "/v1/topics/durable/records", map[string]any{"records": []map[string]any{{"value": "after", "partition": 0}}}, 200, &out)
	if out.Offsets[0].Offset != 5 {
		t.Fatalf("offset after restart: %+v", out)
	}
}

func TestHTTPKafkaAPIVersionsAndCluster(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	var versions api.KafkaAPIVersions
	c.json("GET", "/v1/kafka/api-versions", nil, 200, &versions)
	keys := map[int16]int16{}
	for _, v := range versions.APIVersions {
		keys[v.APIKey] = v.MaxVersion
	}
	if keys[0] < 3 || keys[1] < 4 || keys[18] < 3 {
		t.Fatalf("api versions: %+v", versions)
	}
	var cl api.Cluster
	c.json("GET", "/v1/cluster", nil, 200, &cl)
	if cl.ClusterID == "" || cl.LeaderID != 1 || len(cl.Controllers) != 1 || cl.Controllers[0].Role != "leader" ||
		len(cl.Brokers) != 1 || cl.Brokers[0].State != "alive" || cl.Node == nil || cl.Node.ID != 1 || cl.Node.MetadataDigest == "" {
		t.Fatalf("cluster: %+v", cl)
	}
	n.Stop()
	n.Start()
	var again api.Cluster
	c.json("GET", "/v1/cluster", nil, 200, &again)
	if again.ClusterID != cl.ClusterID {
		t.Fatalf("cluster id changed across restart: %s -> %s", cl.ClusterID, again.ClusterID)
	}
}

// SIGTERM ends open live-tail streams and long polls after a short grace
// instead of waiting for them through the whole shutdown timeout.
func TestShutdownEndsStreams(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--http-max-long-polls", "1"}})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "tailed", "partitions": 1}, 201, nil)
	resp, err := http.Get(n.URL + "/v1/topics/tailed/records/stream?offset=latest")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	// The stream is open (its headers came back); the poll is waiting once
	// it holds the node's one long-poll slot.
	poll := startLongPoll(t, n, "/v1/topics/tailed/partitions/0/records?offset=latest&wait_ms=60000")
	n.Stop()
	<-ended
	<-poll
	if strings.Contains(n.Logs(), "stop HTTP") {
		t.Fatalf("shutdown waited for the stream until its timeout:\n%s", n.Logs())
	}
}
