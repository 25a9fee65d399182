package kafkaconn

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cancelling a request's context ends the wait for its answer at once: a
// broker closing its fetchers waited up to a fetch's whole deadline (30 s)
// for a slow leader's answer, so a controlled shutdown at 30,000
// partitions did not exit within 30 s (issue 19).
func TestDoEndsWithItsContext(t *testing.T) {
	c := silentPeer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Do(ctx, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do after its context was cancelled: %v, want context.Canceled", err)
	}
}

// silentPeer is a connection to a peer that reads every request and never
// answers, closed when the test ends.
func silentPeer(t *testing.T) *Conn {
	t.Helper()
	client, server := net.Pipe()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	c := New(client, "test")
	t.Cleanup(func() {
		c.Close()
		server.Close()
	})
	return c
}
