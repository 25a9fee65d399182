package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// reauthHooks counts a franz-go client's broker disconnects and its
// re-authentications (from its debug log).
type reauthHooks struct{ disconnects, reauths atomic.Int64 }

func (h *reauthHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }

func (h *reauthHooks) Level() kgo.LogLevel { return kgo.LogLevelDebug }
func (h *reauthHooks) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.HasPrefix(msg, "sasl expiry limit reached") && strings.Contains(msg, "reauthenticating") {
		h.reauths.Add(1)
	}
}

// TestKafkaSASLReauth: with --connections-max-reauth 2s a franz-go client
// (SCRAM-SHA-512) producing and consuming for about 6 s learns the session
// lifetime from SaslAuthenticate and re-authenticates on its connections
// by itself: every record comes back, at least one re-authentication ran
// and no connection was dropped (a client that does not re-authenticate
// is closed when its session ends: kafkaproto's TestSASLReauth).
func TestKafkaSASLReauth(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required", "--connections-max-reauth", "2s",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, "admin-pw")}})
	c := newAPIClient(t, n)
	for _, call := range []struct {
		path string
		body any
	}{
		{"/v1/users", api.UserRequest{Name: "alice", Password: "alice-pw", Mechanism: "SCRAM-SHA-512"}},
		{"/v1/topics", map[string]any{"name": "reauth", "partitions": 1}},
		{"/v1/acls", api.ACL{ResourceType: "topic", ResourceName: "reauth", Principal: "User:alice", Operation: "all", Permission: "allow"}},
	} {
		if resp, body := authDo(t, c, http.MethodPost, call.path, "admin", "admin-pw", call.body); resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", call.path, resp.StatusCode, body)
		}
	}

	hooks := &reauthHooks{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()),
		kgo.ConsumeTopics("reauth"), kgo.DefaultProduceTopic("reauth"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.WithHooks(hooks), kgo.WithLogger(hooks))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	sent, got := 0, 0
	// Three lifetimes of produce and consume; bounded by count too.
	for i := 0; i < 10000 && time.Since(start) < 6*time.Second; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r-%d", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d after %v: %v", i, time.Since(start), err)
		}
		sent++
		for got < sent {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("fetch after %v: %v", time.Since(start), err)
			}
			got += fs.NumRecords()
		}
		time.Sleep(50 * time.Millisecond) // pace: ~100 rounds, not a CPU spin on 2 cores
	}
	if got != sent {
		t.Fatalf("read %d records, produced %d", got, sent)
	}
	if hooks.reauths.Load() == 0 || hooks.disconnects.Load() != 0 {
		t.Fatalf("%d records over %v: %d re-authentications, %d disconnects; want at least one re-authentication and no disconnect",
			sent, time.Since(start), hooks.reauths.Load(), hooks.disconnects.Load())
	}
	t.Logf("%d records over %v, %d re-authentications, no disconnect", sent, time.Since(start), hooks.reauths.Load())
}
