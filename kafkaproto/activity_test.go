package kafkaproto

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/internal/syncbuf"
)

func TestDescribeBusy(t *testing.T) {
	now := time.Now()
	act := func(p connPhase, key int16, age time.Duration) *activity {
		a := &activity{}
		a.set(p, key)
		a.since.Store(now.Add(-age).UnixNano())
		return a
	}
	got := describeBusy([]*activity{
		act(phaseHandling, 1, 300*time.Millisecond),
		act(phaseEndingSession, -1, 2*time.Second),
		act(phaseHandling, 1, 1200*time.Millisecond),
		act(phaseReading, -1, time.Minute),
	}, now)
	want := "handling Fetch: 2 (oldest 1.2s); ending its fetch session: 1 (oldest 2s); reading: 1 (oldest 1m0s)"
	if got != want {
		t.Fatalf("describeBusy:\n got %s\nwant %s", got, want)
	}
}

// stuckBroker's DescribeConfigs does not return before release is closed,
// whatever its context says: a handler Close has to wait for.
type stuckBroker struct {
	*memBroker
	entered chan struct{}
	release chan struct{}
}

func (b *stuckBroker) DescribeConfigs(ctx context.Context, res ConfigResource) ([]ConfigEntry, error) {
	close(b.entered)
	<-b.release
	return b.memBroker.DescribeConfigs(ctx, res)
}

// A Close that waits for a connection more than a second logs what the
// connection is doing, again each second, then how long it waited.
func TestCloseNamesWhatItWaitsFor(t *testing.T) {
	mb := newMemBroker()
	mustCreate(t, mb, "t", 1)
	b := &stuckBroker{memBroker: mb, entered: make(chan struct{}), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	mb.setAdvertised("127.0.0.1", int32(addr.Port))
	var logs syncbuf.Buffer
	s := NewServer(b, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	go s.Serve(context.Background(), ln)
	cl := newClient(t, ln.Addr().String())
	go func() {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		req.Resources = append(req.Resources, r)
		req.RequestWith(context.Background(), cl)
	}()
	<-b.entered
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "waiting for connections") {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the wait in 10 s; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a handler was still running")
	default:
	}
	if line := logs.String(); !strings.Contains(line, "handling DescribeConfigs: 1 (oldest ") {
		t.Fatalf("the wait's log does not name the handler:\n%s", line)
	}
	// A wait that goes on is logged again: what the connections do
	// changes as they end.
	for strings.Count(logs.String(), "waiting for connections") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("one log of a wait longer than 2 s; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(b.release)
	<-closed
	if !strings.Contains(logs.String(), "kafka listener closed") {
		t.Fatalf("no log of the wait's end:\n%s", logs.String())
	}
}
