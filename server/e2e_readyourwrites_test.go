package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// Once an admin call returns, every node answers with its result: a topic
// created through node 1 is at once described and produced to through nodes
// 2 and 3 over HTTP, and found by a Kafka Metadata request to node 3, 100
// times in a row, never a 404 or UNKNOWN_TOPIC_OR_PARTITION.
func TestCreateThenUseOnOtherNodes(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	n1, n2, n3 := c.Node(1), c.Node(2), c.Node(3)
	kafka3 := rawDial(t, n3.KafkaAddr)
	call := func(n *servertest.Node, method, path, body string, want int) {
		t.Helper()
		req, err := http.NewRequest(method, n.URL+path, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s on node %s: %d %s, want %d", method, path, n.URL, resp.StatusCode, got, want)
		}
	}
	for i := range 100 {
		topic := fmt.Sprintf("rw-%d", i)
		call(n1, "POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"partitions":1,"replication_factor":%d}`, topic, 1+2*(i%2)), 201)
		call(n2, "GET", "/v1/topics/"+topic, "", 200)
		call(n3, "GET", "/v1/topics/"+topic, "", 200)

		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp := rawRoundTrip(t, kafka3, req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			code := int16(-1)
			if len(resp.Topics) == 1 {
				code = resp.Topics[0].ErrorCode
			}
			t.Fatalf("round %d: Kafka Metadata on node 3: %v", i, kerr.ErrorForCode(code))
		}

		// acks=all (the default): every replica of a brand-new partition
		// must exist and fetch at once. A broker that missed the image
		// publishing the topic (a wakeup lost while it applied the one
		// before) never created its replica and the write waited out its
		// 30 s timeout, in about 1 run of 3 on a loaded machine.
		call(n2, "POST", "/v1/topics/"+topic+"/records", `{"records":[{"value":"via node 2"}]}`, 200)
		call(n3, "POST", "/v1/topics/"+topic+"/records", `{"records":[{"value":"via node 3"}]}`, 200)
	}
}
