package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// saslNode runs a node with --auth required, a plaintext and an SSL Kafka
// listener (client certificates from the cluster CA accepted), and users
// alice (SCRAM-SHA-512), bob (SCRAM-SHA-256) and carol (both).
func saslNode(t *testing.T) (n *servertest.Node, sslAddr, certs string) {
	t.Helper()
	certs = makeCerts(t, "2")
	n, sslAddr = startKafkaTLSNode(t, certs, "--auth", "required", "--tls-client-ca-file", filepath.Join(certs, "ca.pem"),
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, "admin-pw"))
	c := newAPIClient(t, n)
	for _, u := range []api.UserRequest{
		{Name: "alice", Password: "alice-pw", Mechanism: "SCRAM-SHA-512"},
		{Name: "bob", Password: "bob-pw", Mechanism: "SCRAM-SHA-256"},
		{Name: "carol", Password: "carol-pw", Mechanism: "SCRAM-SHA-256"},
		{Name: "carol", Password: "carol-pw", Mechanism: "SCRAM-SHA-512"},
	} {
		if resp, body := authDo(t, c, http.MethodPost, "/v1/users", "admin", "admin-pw", u); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create user %s: %d %s", u.Name, resp.StatusCode, body)
		}
	}
	if resp, body := authDo(t, c, http.MethodPost, "/v1/topics", "admin", "admin-pw", map[string]any{"name": "sasl", "partitions": 2}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create topic: %d %s", resp.StatusCode, body)
	}
	// Every authenticated principal may use the topic (authorization has its own test).
	acl := api.ACL{ResourceType: "topic", ResourceName: "sasl", Principal: "User:*", Operation: "all", Permission: "allow"}
	if resp, body := authDo(t, c, http.MethodPost, "/v1/acls", "admin", "admin-pw", acl); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create ACL: %d %s", resp.StatusCode, body)
	}
	return n, sslAddr, certs
}

func franzPing(addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// franzRoundTrip produces n records and reads them back.
func franzRoundTrip(t *testing.T, addr string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics("sasl"), kgo.DefaultProduceTopic("sasl"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("franz-%d", i))).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got += fs.NumRecords()
	}
}

// franz-go (SCRAM-SHA-512 and PLAIN, plaintext and SSL), sarama
// (SCRAM-SHA-256), kafkajs (SCRAM-SHA-256 over SSL) and kcat (PLAIN,
// SCRAM-SHA-512) log in against a real
// node with --auth required; a wrong password answers
// SASL_AUTHENTICATION_FAILED; a client without credentials is refused,
// unless it showed a client certificate from the CA on the SSL listener.
func TestKafkaSASL(t *testing.T) {
	n, sslAddr, certs := saslNode(t)
	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())
	tlsCfg := &tls.Config{RootCAs: caPool(t, certs), MinVersion: tls.VersionTLS12}

	t.Run("franz-go SCRAM-SHA-512", func(t *testing.T) { franzRoundTrip(t, n.KafkaAddr, 5, alice) })
	t.Run("franz-go SCRAM-SHA-512 over SSL", func(t *testing.T) {
		cfg := tlsCfg.Clone() // the SSL listener wants a client certificate; SASL then names the user
		cfg.Certificates = []tls.Certificate{keyPair(t, certs, "2")}
		franzRoundTrip(t, sslAddr, 5, alice, kgo.DialTLSConfig(cfg))
	})
	t.Run("franz-go PLAIN", func(t *testing.T) {
		franzRoundTrip(t, n.KafkaAddr, 1, kgo.SASL(plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()))
	})
	t.Run("wrong password", func(t *testing.T) {
		for _, m := range []sasl.Mechanism{
			scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(),
			scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(), // alice has no SHA-256 credential
			scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism(),
			plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		} {
			if err := franzPing(n.KafkaAddr, kgo.SASL(m)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", m.Name(), err)
			}
		}
	})
	t.Run("anonymous refused", func(t *testing.T) {
		if err := franzPing(n.KafkaAddr); err == nil {
			t.Fatal("a client without credentials was served")
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		cfg := tlsCfg.Clone()
		cfg.Certificates = []tls.Certificate{keyPair(t, certs, "2")}
		franzRoundTrip(t, sslAddr, 1, kgo.DialTLSConfig(cfg))
	})
	t.Run("sarama SCRAM-SHA-256", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Producer.Return.Successes = true
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "bob", "bob-pw"
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xscram.SHA256} }
		prod, err := sarama.NewSyncProducer([]string{n.KafkaAddr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sasl", Value: sarama.StringEncoder("sarama")}); err != nil {
			t.Fatal(err)
		}
		cfg.Net.SASL.Password = "wrong"
		if _, err := sarama.NewSyncProducer([]string{n.KafkaAddr}, cfg); err == nil {
			t.Fatal("sarama logged in with a wrong password")
		}
	})
	t.Run("kafkajs SCRAM-SHA-256 over SSL", func(t *testing.T) {
		dir := filepath.Join("testdata", "kafkajs")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
			servertest.MissingTool(t, fmt.Sprintf("kafkajs not installed (npm ci in %s): %v", dir, err))
		}
		kafkajs := func(user, pass string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "sasl.js", sslAddr, "sasl", "20")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "RUNNEL_KAFKAJS_CA="+filepath.Join(certs, "ca.pem"),
				"RUNNEL_KAFKAJS_CERT="+filepath.Join(certs, "node-2.pem"), "RUNNEL_KAFKAJS_KEY="+filepath.Join(certs, "node-2-key.pem"),
				"RUNNEL_KAFKAJS_SASL=scram-sha-256", "RUNNEL_KAFKAJS_USER="+user, "RUNNEL_KAFKAJS_PASSWORD="+pass)
			return cmd.CombinedOutput()
		}
		if out, err := kafkajs("bob", "bob-pw"); err != nil || !bytes.Contains(out, []byte(`"read":20`)) {
			t.Fatalf("kafkajs as bob: %v\n%s", err, out)
		}
		out, err := kafkajs("bob", "wrong")
		if err == nil || !bytes.Contains(out, []byte("KafkaJSSASLAuthenticationError")) {
			t.Fatalf("kafkajs with a wrong password: %v\n%s", err, out)
		}
	})
	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			servertest.MissingTool(t, "kcat not installed")
		}
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"} {
			login := []string{"-b", n.KafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
				"-X", "sasl.username=carol", "-X", "sasl.password=carol-pw"}
			if mech != "PLAIN" && !librdkafkaSCRAMFixed(t) {
				// librdkafka before 2.6.1 sends the client nonce twice in
				// its client-final-message (confluentinc/librdkafka#4895);
				// runnel checks the nonce as RFC 5802 and Kafka 4 do.
				out, err := exec.Command("kcat", append(login, "-L", "-m", "5")...).CombinedOutput()
				if err == nil || !bytes.Contains(out, []byte("Authentication failed")) {
					t.Fatalf("kcat %s with a librdkafka that sends a bad nonce: %v\n%s", mech, err, out)
				}
				t.Logf("kcat %s: this librdkafka (< 2.6.1) sends a doubled SCRAM nonce; refused as by Kafka 4", mech)
				continue
			}
			kcat(t, strings.NewReader("kcat-"+mech+"\n"), append(login, "-P", "-t", "sasl")...)
			out := kcat(t, nil, append(login, "-C", "-t", "sasl", "-e", "-q")...)
			if !bytes.Contains(out, []byte("kcat-"+mech)) {
				t.Fatalf("kcat %s read back:\n%s", mech, out)
			}
		}
		bad := exec.Command("kcat", "-b", n.KafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=carol", "-X", "sasl.password=wrong", "-L", "-m", "5")
		if out, err := bad.CombinedOutput(); err == nil {
			t.Fatalf("kcat with a wrong password listed metadata:\n%s", out)
		}
	})
}

// saramaSCRAM adapts xdg-go/scram to sarama's SCRAMClient.
type saramaSCRAM struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// librdkafkaSCRAMFixed reports whether kcat's librdkafka is 2.6.1 or later.
func librdkafkaSCRAMFixed(t *testing.T) bool {
	out, _ := exec.Command("kcat", "-V").CombinedOutput()
	_, after, ok := bytes.Cut(out, []byte("librdkafka "))
	if !ok {
		t.Fatalf("kcat -V: no librdkafka version in %q", out)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(string(after), "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("kcat -V: %q: %v", after, err)
	}
	return major > 2 || major == 2 && (minor > 6 || minor == 6 && patch >= 1)
}
