package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// Every admin change is in the node's log as an audit=true line naming
// the principal, the client address, the door and the result, over HTTP
// and Kafka, refusals included; no password or token is ever logged.
func TestAuditLog(t *testing.T) {
	const admin, alicePwd = "admin-pw-audit-9f1", "alice-pw-audit-77c"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin)}})
	c := newAPIClient(t, n)
	do := func(user, pwd, method, path string, body any, want int) []byte {
		t.Helper()
		resp, out := authDo(t, c, method, path, user, pwd, body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, out)
		}
		return out
	}
	do("admin", admin, http.MethodPost, "/v1/users", api.UserRequest{Name: "alice", Password: alicePwd, Mechanism: "SCRAM-SHA-512"}, 201)
	do("admin", admin, http.MethodPost, "/v1/topics", map[string]any{"name": "audited", "partitions": 1}, 201)
	do("admin", admin, http.MethodPatch, "/v1/topics/audited/configs", map[string]any{"configs": map[string]string{"retention.ms": "60000"}}, 200)
	do("admin", admin, http.MethodPost, "/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "audited", Principal: "User:alice", Operation: "read", Permission: "allow"}, 201)
	rate := 5000.0
	do("admin", admin, http.MethodPut, "/v1/quotas", api.Quota{Entity: api.QuotaEntity{User: "alice"}, ProducerByteRate: &rate}, 200)
	var tok api.NewToken
	_ = json.Unmarshal(do("alice", alicePwd, http.MethodPost, "/v1/tokens", nil, 201), &tok)
	do("alice", alicePwd, http.MethodDelete, "/v1/topics/audited", nil, 403)
	do("alice", alicePwd, http.MethodPost, "/v1/topics/audited/records", map[string]any{"records": []map[string]any{{"value": 1}}}, 403)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []struct{ user, pwd, topic string }{{"admin", admin, "kafka-audited"}, {"alice", alicePwd, "kafka-refused"}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ClientID("audit-test"), kgo.SASL(scram.Auth{User: u.user, Pass: u.pwd}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = u.topic, 1, 1
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}

	var audit []string
	servertest.WaitFor(t, 30*time.Second, "the Kafka audit lines", func() bool {
		audit = audit[:0]
		for _, l := range strings.Split(n.Logs(), "\n") {
			if strings.Contains(l, "audit=true") {
				audit = append(audit, l)
			}
		}
		return strings.Contains(strings.Join(audit, "\n"), "kafka-refused")
	})
	for _, want := range [][]string{
		{"door=http", "principal=User:admin", `action="POST /v1/users"`, `result="ok 201"`},
		{"door=http", "principal=User:admin", `action="POST /v1/topics"`},
		{"door=http", `action="PATCH /v1/topics/audited/configs"`, `result="ok 200"`},
		{"door=http", `action="POST /v1/acls"`},
		{"door=http", `action="PUT /v1/quotas"`},
		{"door=http", "principal=User:alice", `action="POST /v1/tokens"`, `result="ok 201"`},
		{"door=http", "principal=User:alice", `action="DELETE /v1/topics/audited"`, `result="error 403"`},
		{"door=kafka", "principal=User:admin", "action=CreateTopics", "resources=kafka-audited", "result=ok", "client_id=audit-test"},
		{"door=kafka", "principal=User:alice", "action=CreateTopics", "resources=kafka-refused", "TOPIC_AUTHORIZATION_FAILED"},
	} {
		if !anyLineHasAll(audit, want) {
			t.Errorf("no audit line with %q in:\n%s", want, strings.Join(audit, "\n"))
		}
	}
	for _, l := range audit {
		if !strings.Contains(l, "level=INFO") || !strings.Contains(l, "client=127.0.0.1:") {
			t.Errorf("audit line without level INFO or client address: %s", l)
		}
		if strings.Contains(l, "/records") {
			t.Errorf("produce audited: %s", l)
		}
	}
	logs := n.Logs()
	for _, secret := range []string{admin, alicePwd, tok.Token} {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("a secret is in the log: %q", secret)
		}
	}
}

func anyLineHasAll(lines, parts []string) bool {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
