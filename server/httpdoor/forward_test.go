package httpdoor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/broker/producers"

	"github.com/runnel/runnel/recordbatch"
)

// fakeLeader serves the forwarded requests of one test in-process: the
// Forwarder dials it for any node host, as it would the node's
// inter-node port.
func fakeLeader(t *testing.T, h http.HandlerFunc) (*Forwarder, *int32) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	dialed := new(int32)
	f := NewForwarder(func(ctx context.Context, id int32) (net.Conn, error) {
		*dialed = id
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	})
	return f, dialed
}

func b64s(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A forwarded consume asks the leader for base64 (so any bytes survive
// JSON), marks the request forwarded, and decodes every field of the
// leader's answer: keys, values, headers in order (binary names
// included), transaction markers and the offsets.
func TestForwarderConsume(t *testing.T) {
	f, dialed := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/v1/topics/a b/partitions/3/records" || r.Header.Get(forwardedHeader) == "" ||
			q.Get("encoding") != "base64" || q.Get("offset") != "7" || q.Get("max_records") != "10" ||
			q.Get("wait_ms") != "250" || q.Get("isolation") != "read_uncommitted" || q.Get("include_control") != "true" {
			t.Errorf("forwarded consume %s %v (forwarded %q)", r.URL.Path, q, r.Header.Get(forwardedHeader))
		}
		fmt.Fprintf(w, `{"records":[
			{"partition":3,"offset":7,"timestamp":1000,"key":%q,"value":%q,
			 "header_list":[{"key":"a","value":%q,"key_encoding":"string"},{"key":%q,"value":null,"key_encoding":"base64"}]},
			{"partition":3,"offset":8,"timestamp":1001,"key":null,"value":null,"transactional":true,
			 "control":{"type":"commit","producer_id":5,"producer_epoch":1,"coordinator_epoch":2}}],
			"next_offset":9,"high_watermark":9,"start_offset":0}`, b64s("k"), b64s("v\x00"), b64s("1"), b64s("\xff"))
	})
	res, err := f.Consume(context.Background(), NodeHost(2), api.ConsumeRequest{Topic: "a b", Partition: 3, Offset: 7,
		MaxRecords: 10, MaxBytes: 1 << 20, Wait: 250 * time.Millisecond, ReadUncommitted: true, IncludeControl: true})
	if err != nil {
		t.Fatal(err)
	}
	if *dialed != 2 || len(res.Records) != 2 || res.NextOffset != 9 || res.HighWatermark != 9 {
		t.Fatalf("dialed node %d, result %+v", *dialed, res)
	}
	r := res.Records[0]
	if string(r.Key) != "k" || string(r.Value) != "v\x00" || r.Offset != 7 || r.Timestamp.UnixMilli() != 1000 ||
		len(r.Headers) != 2 || r.Headers[0].Key != "a" || string(r.Headers[0].Value) != "1" ||
		r.Headers[1].Key != "\xff" || r.Headers[1].Value != nil {
		t.Fatalf("record %+v", r)
	}
	if m := res.Records[1]; m.Key != nil || m.Value != nil || !m.Transactional || m.Control == nil || m.Control.ProducerID != 5 {
		t.Fatalf("marker %+v", m)
	}
}

// A forwarded produce sends the records base64-encoded with their
// partition and CreateTime, and the idempotency key in its header; the
// leader's first offset is the batch's base.
func TestForwarderProduce(t *testing.T) {
	key := producers.NewKey("User:alice", "retry-1", [32]byte{1})
	f, _ := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Records []wireOutRecord `json:"records"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil || len(body.Records) != 2 {
			t.Errorf("body %s: %v", raw, err)
		}
		if q := r.URL.Query(); q.Get("encoding") != "base64" || q.Get("acks") != "all" || r.Header.Get(producers.KeyHeader) != key.String() {
			t.Errorf("query %v, key header %q", q, r.Header.Get(producers.KeyHeader))
		}
		if rec := body.Records[0]; rec.Partition != 1 || *rec.Key != b64s("k") || *rec.Value != b64s("v") ||
			*rec.Timestamp != 42 || *rec.Headers["h"] != b64s("x") {
			t.Errorf("record %+v", rec)
		}
		fmt.Fprint(w, `{"offsets":[{"partition":1,"offset":10},{"partition":1,"offset":11}]}`)
	})
	base, err := f.produce(context.Background(), NodeHost(1), "t", 1, []recordbatch.NewRecord{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 42, Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{Value: []byte("w"), Timestamp: 43}}, api.AcksAll, &key)
	if err != nil || base != 10 {
		t.Fatalf("base %d, %v", base, err)
	}
}

// The leader's problem answer becomes the api sentinel of its type, so the
// client sees the leader's error as if it were local; a corrupt batch keeps
// the position the leader named.
func TestForwarderProblems(t *testing.T) {
	kind := func(err error) api.ProblemKind {
		for _, k := range api.ProblemKinds() {
			if k.Err == err {
				return k
			}
		}
		t.Fatalf("no problem kind for %v", err)
		return api.ProblemKind{}
	}
	var answer string
	var status int
	f, _ := fakeLeader(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	})
	req := api.ConsumeRequest{Topic: "t", MaxRecords: 1, MaxBytes: 1}

	k := kind(api.ErrUnknownTopic)
	status, answer = k.Status, fmt.Sprintf(`{"type":%q,"status":%d,"detail":"unknown topic t"}`, k.Type, k.Status)
	if _, err := f.Consume(context.Background(), NodeHost(2), req); !errors.Is(err, api.ErrUnknownTopic) {
		t.Fatalf("unknown topic on the leader: %v", err)
	}

	k = kind(api.ErrCorruptBatch)
	status, answer = k.Status, fmt.Sprintf(`{"type":%q,"status":%d,"topic":"t","partition":0,"offset":5,"next_offset":9}`, k.Type, k.Status)
	_, err := f.Consume(context.Background(), NodeHost(2), req)
	var cb *api.CorruptBatchError
	if !errors.As(err, &cb) || cb.Topic != "t" || cb.Offset != 5 || cb.NextOffset != 9 || !errors.Is(err, api.ErrCorruptBatch) {
		t.Fatalf("corrupt batch on the leader: %v", err)
	}
}

// An unreachable leader is not-leader (503 with Retry-After: the client
// retries and finds the new leader), not an internal error.
func TestForwarderUnreachable(t *testing.T) {
	f := NewForwarder(func(context.Context, int32) (net.Conn, error) { return nil, errors.New("connection refused") })
	_, err := f.Consume(context.Background(), NodeHost(3), api.ConsumeRequest{Topic: "t", MaxRecords: 1, MaxBytes: 1})
	if !errors.Is(err, api.ErrNotLeader) {
		t.Fatalf("unreachable leader: %v", err)
	}
}

// groupOfPath finds the group of /v1/groups/{group}/... (escaped names
// included) and nothing else, so GroupsProxy sends only group requests.
func TestGroupOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/groups/billing":                 "billing",
		"/v1/groups/billing/members/m-1":     "billing",
		"/v1/groups/a%2Fb/offsets":           "a/b",
		"/v1/groups/":                        "",
		"/v1/groups":                         "",
		"/v1/topics/billing":                 "",
		"/v1/groups/with%20space/members/x/": "with space",
	} {
		u, err := url.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := groupOfPath(u); got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", path, got, ok, want)
		}
	}
}

// closeCountingConn records its Close, as the forwarder's pool would not
// show it.
type closeCountingConn struct {
	net.Conn
	closed *atomic.Int32
	once   sync.Once
}

func (c *closeCountingConn) Close() error {
	c.once.Do(func() { c.closed.Add(1) })
	return c.Conn.Close()
}

// A forwarder owns the connections it dialed: Close closes them all, the
// idle ones in its pool included (they would otherwise hold a socket on
// the peer, and two goroutines here, for the pool's idle timeout after the
// node stopped), and it dials no new one afterwards.
func TestForwarderCloseClosesIdleConnections(t *testing.T) {
	var peerOpen atomic.Int32 // connections the peer holds open
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"records":[],"next_offset":0,"high_watermark":0}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			peerOpen.Add(1)
		case http.StateClosed, http.StateHijacked:
			peerOpen.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	var dialed, closed atomic.Int32
	f := NewForwarder(func(ctx context.Context, id int32) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		if err != nil {
			return nil, err
		}
		dialed.Add(1)
		return &closeCountingConn{Conn: c, closed: &closed}, nil
	})
	// Two requests at once leave two connections idle in the pool.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := f.Consume(context.Background(), NodeHost(2), api.ConsumeRequest{Topic: "t", MaxRecords: 1, MaxBytes: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if dialed.Load() == 0 || closed.Load() != 0 {
		t.Fatalf("before Close: %d dialed, %d closed", dialed.Load(), closed.Load())
	}
	f.Close()
	if n, c := dialed.Load(), closed.Load(); c != n {
		t.Fatalf("after Close: %d of the %d connections the forwarder dialed are still open", n-c, n)
	}
	// The peer sees them go (it notices on its own goroutines: bounded wait).
	for deadline := time.Now().Add(10 * time.Second); peerOpen.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the peer still holds %d connections from a closed forwarder", peerOpen.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.Consume(context.Background(), NodeHost(2), api.ConsumeRequest{Topic: "t", MaxRecords: 1, MaxBytes: 1}); err == nil {
		t.Fatal("a closed forwarder forwarded a request")
	}
	if n, c := dialed.Load(), closed.Load(); c != n {
		t.Fatalf("a closed forwarder left %d connections open", n-c)
	}
}
