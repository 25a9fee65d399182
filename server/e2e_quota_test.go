package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// quotaWindow is how long TestQuotasLimitProducers measures: 20 s (the
// issue's window, where a limited producer must stay within ±15% of its
// quota) with RUNNEL_QUOTA_WINDOW=20s (make quota-check); 8 s by default,
// where the one-second burst a quota allows weighs more, so the bounds
// are wider.
func quotaWindow() (time.Duration, float64, float64) {
	if d, err := time.ParseDuration(os.Getenv("RUNNEL_QUOTA_WINDOW")); err == nil && d >= 10*time.Second {
		return d, 0.85, 1.15
	}
	return 8 * time.Second, 0.7, 1.5
}

// A user with a 1 MiB/s producer quota (set with Kafka's AlterClientQuotas
// for alice, over HTTP PUT /v1/quotas for carol) is held to it, alice over
// Kafka (throttle_time_ms and a muted connection) and carol over HTTP
// (delayed or 429 answers), while bob, with no quota, asking for 3 MiB/s
// on both doors of the same node at the same time, is never throttled. The
// rates are the node's behaviour where it holds a producer back (at most
// the quota); where it lets one go (at least the quota, as fast as bob),
// they are the machine's too, and checked only when it was fast enough.
func TestQuotasLimitProducers(t *testing.T) {
	const limit = 1 << 20
	window, lo, hi := quotaWindow()
	const admin = "admin-pw-quota"
	n := servertest.Start(t, servertest.Options{Args: []string{"--auth", "required",
		"--bootstrap-superuser", "admin", "--bootstrap-superuser-password-file", passwordFile(t, admin),
		"--super-users", "User:alice,User:bob,User:carol"}})
	c := newAPIClient(t, n)
	for _, u := range []string{"alice", "bob", "carol"} {
		resp, body := authDo(t, c, http.MethodPost, "/v1/users", "admin", admin, api.UserRequest{Name: u, Password: u + "-pw", Mechanism: "SCRAM-SHA-512"})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d %s", u, resp.StatusCode, body)
		}
	}
	for _, topic := range []string{"qa", "qb", "qc", "qd"} {
		authDo(t, c, http.MethodPost, "/v1/topics", "admin", admin, map[string]any{"name": topic, "partitions": 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	throttled := map[string]*throttleCount{} // by user: throttle_time_ms answers
	client := func(user string) *kgo.Client {
		if throttled[user] == nil {
			throttled[user] = &throttleCount{}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()),
			kgo.ClientID(user+"-app"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(32),
			kgo.WithHooks(throttled[user]),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // the quota counts bytes on the wire
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// alice's quota over Kafka, described back over Kafka and HTTP.
	alice := client("alice")
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "user", kmsg.StringPtr("alice")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", limit
	entry.Entity, entry.Ops = append(entry.Entity, ent), append(entry.Ops, op)
	alter.Entries = append(alter.Entries, entry)
	aresp, err := alter.RequestWith(ctx, client("bob"))
	if err != nil || len(aresp.Entries) != 1 || aresp.Entries[0].ErrorCode != 0 {
		t.Fatalf("AlterClientQuotas: %v %+v", err, aresp)
	}
	desc := kmsg.NewPtrDescribeClientQuotasRequest()
	comp := kmsg.NewDescribeClientQuotasRequestComponent()
	comp.EntityType, comp.MatchType, comp.Match = "user", 0, kmsg.StringPtr("alice")
	desc.Components = append(desc.Components, comp)
	dresp, err := desc.RequestWith(ctx, alice)
	if err != nil || dresp.ErrorCode != 0 || len(dresp.Entries) != 1 || dresp.Entries[0].Values[0].Value != limit {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, dresp)
	}
	// carol's over HTTP.
	rate := float64(limit)
	resp, body := authDo(t, c, http.MethodPut, "/v1/quotas", "admin", admin, api.Quota{Entity: api.QuotaEntity{User: "carol"}, ProducerByteRate: &rate})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /v1/quotas: %d %s", resp.StatusCode, body)
	}
	var list api.QuotaList
	resp, body = authDo(t, c, http.MethodGet, "/v1/quotas", "admin", admin, nil)
	if err := json.Unmarshal(body, &list); err != nil || len(list.Quotas) != 2 {
		t.Fatalf("GET /v1/quotas: %d %s", resp.StatusCode, body)
	}

	// The CLI sets, lists and deletes a default-user quota.
	cli := func(args ...string) string {
		out, err := exec.Command(servertest.Binary(t), append([]string{"--server", n.URL, "--user", "admin", "--password-file", passwordFile(t, admin), "quota"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("runnel quota %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cli("set", "--default-user", "--consumer-byte-rate", "5000000")
	if out := cli("list"); !strings.Contains(out, "<default>") || !strings.Contains(out, "5000000") || !strings.Contains(out, "carol") {
		t.Fatalf("runnel quota list:\n%s", out)
	}
	cli("delete", "--default-user")
	if out := cli("list", "--default-user"); strings.Contains(out, "5000000") {
		t.Fatalf("runnel quota delete left:\n%s", out)
	}

	var wg sync.WaitGroup
	rates := map[string]float64{}
	refused := map[string]int{} // HTTP 429 answers
	var mu sync.Mutex
	run := func(name string, f func(deadline time.Time) (sent int64, tooMany int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			sent, tooMany := f(start.Add(window))
			mu.Lock()
			rates[name] = float64(sent) / time.Since(start).Seconds()
			refused[name] = tooMany
			mu.Unlock()
		}()
	}
	kafkaRun := func(cl *kgo.Client, topic string, pace int) func(time.Time) (int64, int) {
		return func(deadline time.Time) (int64, int) { return kafkaProduceFor(t, ctx, cl, topic, deadline, pace), 0 }
	}
	run("alice-kafka", kafkaRun(alice, "qa", 0))
	run("bob-kafka", kafkaRun(client("bob"), "qb", 3*limit))
	run("carol-http", func(deadline time.Time) (int64, int) {
		return httpProduceFor(t, n.URL, httpToken(t, c, "carol"), "qc", deadline, 0)
	})
	run("bob-http", func(deadline time.Time) (int64, int) {
		return httpProduceFor(t, n.URL, httpToken(t, c, "bob"), "qd", deadline, 3*limit)
	})
	wg.Wait()
	for k, v := range rates {
		rates[k] = v / limit
	}
	t.Logf("window %v; MiB/s: %v; HTTP 429s: %v; Kafka throttles: alice %d, bob %d", window, rates, refused,
		throttled["alice"].n.Load(), throttled["bob"].n.Load())
	// Held to the quota: the upper bound is the node's doing, whatever the
	// machine's speed. The lower one shows the quota lets the producer have
	// its rate, which only a machine that could push more over that door in
	// this window (the unlimited producer did) can show: a loaded one may
	// not reach 1 MiB/s at all (speed is the benchmarks' to show).
	for limited, free := range map[string]string{"alice-kafka": "bob-kafka", "carol-http": "bob-http"} {
		r := rates[limited]
		if r > hi {
			t.Errorf("%s produced %.2f MiB/s with a 1 MiB/s quota (want at most %.2f)", limited, r, hi)
		}
		if r < lo && rates[free] > hi {
			t.Errorf("%s produced %.2f MiB/s with a 1 MiB/s quota (want at least %.2f: %s, without a quota, had %.2f)", limited, r, lo, free, rates[free])
		} else if r < lo {
			t.Logf("%s: %.2f MiB/s; the machine did not push more than %.2f MiB/s over its door without a quota either: the lower bound is not checked", limited, r, hi)
		}
	}
	// Unlimited: never throttled, on either door (not: fast, which a
	// machine loaded by other work may not be).
	if n := throttled["bob"].n.Load(); n != 0 {
		t.Errorf("bob, without a quota, was answered throttle_time_ms %d times", n)
	}
	if refused["bob-http"] != 0 {
		t.Errorf("bob, without a quota, was answered 429 %d times over HTTP", refused["bob-http"])
	}
}

// throttleCount counts the throttle_time_ms answers a Kafka client gets.
type throttleCount struct{ n atomic.Int64 }

func (c *throttleCount) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		c.n.Add(1)
	}
}

// kafkaProduceFor produces 16 KiB records until deadline (paced to pace
// bytes/s unless 0) and returns the value bytes acknowledged.
func kafkaProduceFor(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, deadline time.Time, pace int) int64 {
	value := bytes.Repeat([]byte("q"), 16<<10)
	var acked int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for sent := 0; time.Now().Before(deadline); sent += len(value) {
		if pace > 0 {
			if ahead := time.Duration(float64(sent)/float64(pace)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err == nil && time.Now().Before(deadline) {
				mu.Lock()
				acked += int64(len(r.Value))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}

func httpToken(t *testing.T, c *apiClient, user string) string {
	resp, body := authDo(t, c, http.MethodPost, "/v1/tokens", user, user+"-pw", nil)
	var tok api.NewToken
	if err := json.Unmarshal(body, &tok); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("token for %s: %d %s", user, resp.StatusCode, body)
	}
	return tok.Token
}

// httpProduceFor posts 64 KiB bodies one after another until deadline
// (paced unless 0), waiting out 429s, and returns the body bytes accepted
// and the 429s.
func httpProduceFor(t *testing.T, base, token, topic string, deadline time.Time, pace int) (accepted int64, tooMany int) {
	body := []byte(`{"records":[{"value":"` + strings.Repeat("h", 64<<10-40) + `"}]}`)
	cl := &http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	for sent := 0; time.Now().Before(deadline); {
		if pace > 0 {
			if ahead := time.Duration(float64(sent)/float64(pace)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/topics/"+topic+"/records?encoding=string", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			t.Errorf("produce: %v", err)
			return accepted, tooMany
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			if time.Now().Before(deadline) {
				accepted += int64(len(body))
			}
			sent += len(body)
		case http.StatusTooManyRequests:
			tooMany++
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if secs < 1 || !strings.Contains(string(out), "quota-exceeded") {
				t.Errorf("429 without a quota problem and Retry-After: %q %s", resp.Header.Get("Retry-After"), out)
				return accepted, tooMany
			}
			time.Sleep(time.Duration(secs) * time.Second)
		default:
			t.Errorf("produce: %d %s", resp.StatusCode, out)
			return accepted, tooMany
		}
	}
	return accepted, tooMany
}
