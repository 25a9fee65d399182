package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
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
// against a node without authentication, in the same run, interleaved.
// Metrics: MB/s of each and ratio (auth/plain; the issue asks >= 0.9).
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
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	const perOp = 20_000
	type side struct {
		node *servertest.Node
		opts []kgo.Opt
		prod time.Duration
		cons time.Duration
	}
	sides := []*side{{node: plain}, {node: secure, opts: []kgo.Opt{login}}}
	for _, s := range sides {
		runnelTopicAs(b, s.node, "bench-auth", admin)
	}
	b.SetBytes(perOp * int64(len(value)) * 2 * 3)
	b.ResetTimer()
	// Three rounds per op, interleaved and alternating which side goes
	// first: the shared machine's drift and the first run's warm-up hit
	// both sides alike.
	const rounds = 3
	for i := range b.N * rounds {
		order := sides
		if i%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			s.prod += benchProduce(b, s.node.KafkaAddr, "bench-auth", perOp, value, s.opts...)
		}
		for _, s := range order {
			s.cons += benchConsume(b, s.node.KafkaAddr, "bench-auth", perOp, s.opts...)
		}
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(b.N*rounds*perOp*len(value)) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(sides[0].prod), "plain-produce-MB/s")
	b.ReportMetric(mbps(sides[1].prod), "auth-produce-MB/s")
	b.ReportMetric(mbps(sides[0].cons), "plain-consume-MB/s")
	b.ReportMetric(mbps(sides[1].cons), "auth-consume-MB/s")
	b.ReportMetric(sides[0].prod.Seconds()/sides[1].prod.Seconds(), "produce-ratio")
	b.ReportMetric(sides[0].cons.Seconds()/sides[1].cons.Seconds(), "consume-ratio")
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
