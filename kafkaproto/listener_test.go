package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startServer serves b on a loopback port and advertises it.
func startServer(t testing.TB, b *memBroker, opts Options) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	b.setAdvertised("127.0.0.1", int32(addr.Port))
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := NewServer(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if n := b.chunks.Load(); n != 0 {
			t.Errorf("%d chunks left open", n)
		}
	})
	return ln.Addr().String(), s
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func mustCreate(t testing.TB, b *memBroker, topic string, partitions int32) {
	t.Helper()
	if err := b.CreateTopic(context.Background(), TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
}

// TestFranzGoRoundTrip produces with franz-go's defaults (idempotent,
// snappy, pipelined) and consumes everything back, checking order per
// partition, keys, values and headers.
func TestFranzGoRoundTrip(t *testing.T) {
	b := newMemBroker()
	addr, srv := startServer(t, b, Options{})
	mustCreate(t, b, "orders", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod := newClient(t, addr, kgo.DefaultProduceTopic("orders"))
	const n = 3000
	for i := range n {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i % 17)), Value: []byte(fmt.Sprintf("value-%d", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cons := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	last := map[int32]int{0: -1, 1: -1, 2: -1}
	nextOffset := map[int32]int64{}
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("got %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			i, err := strconv.Atoi(string(r.Headers[0].Value))
			if err != nil || string(r.Value) != fmt.Sprintf("value-%d", i) || string(r.Key) != strconv.Itoa(i%17) {
				t.Fatalf("record %d/%d: key %q value %q headers %v", r.Partition, r.Offset, r.Key, r.Value, r.Headers)
			}
			if i <= last[r.Partition] || r.Offset != nextOffset[r.Partition] {
				t.Fatalf("partition %d out of order: record %d at offset %d after %d", r.Partition, i, r.Offset, last[r.Partition])
			}
			last[r.Partition], nextOffset[r.Partition] = i, r.Offset+1
		})
	}
	if b.sockets.Load() == 0 {
		t.Fatal("no record chunk was handed the TCP connection (the sendfile path)")
	}
	if srv.sessionIDs.Load() == 0 {
		t.Fatal("the consumer used no fetch session")
	}
}

// TestLongPollWakesOnAppend: a fetch waiting for MinBytes is answered as
// soon as a record arrives, well before MaxWait.
func TestLongPollWakesOnAppend(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	mustCreate(t, b, "t", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons := newClient(t, addr, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(time.Minute))
	prod := newClient(t, addr, kgo.DefaultProduceTopic("t"))
	polled := make(chan kgo.Fetches, 1)
	go func() { polled <- cons.PollFetches(ctx) }()
	// Produce only once the consumer's fetch found the partition empty: the
	// listener is then waiting on (or about to select on) the partition's
	// notification taken before that read, so the append must wake it; a
	// record back before MaxWait proves the wake path ran.
	for b.emptyFetches.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the consumer never fetched the empty partition")
		}
		time.Sleep(time.Millisecond) // polling an observation, not ordering by time
	}
	if err := prod.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := <-polled
	if ctx.Err() != nil {
		t.Fatal("consumer not woken by the append (fetch waited for MaxWait)")
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("records %v, errors %v", recs, fs.Errors())
	}
}

// TestMalformedFrameClosesOnlyThatConnection sends garbage on one
// connection and checks that another keeps working.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{})
	good := dial(t, addr)
	bad := dial(t, addr)
	// Metadata v12 frame whose topic array claims 2^31-1 entries.
	frame := []byte{0, 3, 0, 12, 0, 0, 0, 7, 0, 0, 0 /* tags */, 0xff, 0xff, 0xff, 0xff, 0x07}
	writeFrame(t, bad, frame)
	assertClosed(t, bad)
	roundTrip(t, good, apiVersionsRequest(3))
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func assertClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf [1]byte
	if _, err := c.Read(buf[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

func TestConnectionLimit(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{MaxConnections: 1})
	first := dial(t, addr)
	roundTrip(t, first, apiVersionsRequest(0)) // first is registered
	second := dial(t, addr)
	assertClosed(t, second)
	roundTrip(t, first, apiVersionsRequest(0))
}

func TestIdleTimeout(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{IdleTimeout: 100 * time.Millisecond})
	c := dial(t, addr)
	roundTrip(t, c, apiVersionsRequest(1))
	assertClosed(t, c)
}

func TestFrameLimits(t *testing.T) {
	b := newMemBroker()
	addr, _ := startServer(t, b, Options{MaxRequestSize: 4 << 20})
	for _, tc := range []struct {
		name string
		size uint32
		key  byte
	}{
		{"produce over MaxRequestSize", 4<<20 + 1, 0},
		{"metadata over 1 MiB", 1<<20 + 1, 3},
		{"negative size", 0x80000000, 3},
		{"too small", 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			hdr := []byte{byte(tc.size >> 24), byte(tc.size >> 16), byte(tc.size >> 8), byte(tc.size), 0, tc.key, 0, 0}
			if _, err := c.Write(hdr); err != nil {
				t.Fatal(err)
			}
			assertClosed(t, c)
		})
	}
}

// panickyBroker panics in DescribeConfigs.
type panickyBroker struct{ *memBroker }

func (panickyBroker) DescribeConfigs(context.Context, ConfigResource) ([]ConfigEntry, error) {
	panic("broker bug")
}

// TestHandlerPanicClosesOnlyThatConnection: a panic while serving a request
// closes that connection; the server keeps serving others.
func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "t", 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(panickyBroker{b}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	go s.Serve(context.Background(), ln)
	defer s.Close()
	bad := dial(t, ln.Addr().String())
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	if _, err := bad.Write(testFormatter.AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	assertClosed(t, bad)
	roundTrip(t, dial(t, ln.Addr().String()), apiVersionsRequest(3))
}
